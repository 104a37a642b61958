"""An experiment's typed definition, resolved and validated once: `ExperimentSpec`.

Every front end builds the same object the same way (vLLM sweep's pattern: an args dataclass with
`add_cli_args` / `from_cli_args`): the CLI's `experiment` through `from_cli_args`, New experiment,
the demo, a search's steps, a confirmation and a finding's next experiment through `build`. `build`
is the one place a value is checked: the parameter's and the baseline's names are resolved (the
lab's curated table, else the flags of the user's own vLLM, never one of the deny-list), every value
is typed and bounded, the baseline validated, each start checked as it will be launched, a workload
value applied to the workload it changes. `check_with_engine` then asks the engine's own parser
about the flags only it knows (it imports vLLM, so New experiment asks on Start), and
tuning.experiment.plan hands `row()` to the store. Nothing here starts or writes anything.

The CLI's default and New experiment's is to repeat until decided under a time budget: one run a
side can never decide anything, and a fixed count of one says so (`warning`).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.json_depth import nesting_words, too_deep
from core.records import NewExperiment
from tuning.engine.params import Param, ParamError, get_param, show_value
from tuning.engine.validate import check_starts, parse_assignments, parse_values, validate_config
from tuning.experiment.size import DEFAULT_BUDGET_MINUTES, DEFAULT_MAX_REPEATS, experiment_runs
from tuning.measure.traffic.options import TrafficOptions
from tuning.measure.traffic.workload import Workload, add_workload_arguments, workload_from_args

if TYPE_CHECKING:  # the store and the engine's catalog load when an experiment is built, not
    # when `--help` is (sqlite-utils brings pandas)
    from tuning.engine.flags.catalog import Catalog
    from tuning.engine.spec import EngineSpec
    from tuning.experiment.repeats import AutoRepeats
    from tuning.measure.traffic import WorkloadSpec

AUTO = "auto"
RESIDENT_MODES = ("auto", "on", "off")  # --resident: the first is the default
ONE_RUN = (
    "one run a side cannot decide anything (a verdict needs at least two runs of each value): "
    "repeat until decided, the default, or ask for 2 or more"
)


@dataclass(frozen=True)
class ExperimentSpec:
    """One experiment, every part typed and checked: the parameter and its values (the first is
    the baseline every verdict is against), the baseline configuration without the varied flag,
    the workload (and its traffic spec), the engine (its learned flags on it) or an attached
    server, a fixed number of rounds or until decided (`auto`), and who asks where."""

    param: Param
    values: tuple[Any, ...]
    workload: Workload
    engine: EngineSpec | None
    config: Mapping[str, Any] = field(default_factory=dict)
    repeats: int = 1
    auto: AutoRepeats | None = None
    base_url: str | None = None
    model: str | None = None
    name: str = ""
    author: str = ""
    host: str = ""
    workload_spec: WorkloadSpec | None = None
    resident: str = RESIDENT_MODES[0]

    @classmethod
    def build(
        cls,
        *,
        param: str,
        values: str | Sequence[Any],
        workload: Workload,
        engine: EngineSpec | None,
        base_config: Mapping[str, Any] | None = None,
        repeats: int = 1,
        auto: AutoRepeats | None = None,
        base_url: str | None = None,
        model: str | None = None,
        name: str | None = None,
        author: str = "",
        host: str = "",
        workload_spec: WorkloadSpec | None = None,
        catalog: Catalog | None = None,
        db_path: str | Path | None = None,
        resident: str = RESIDENT_MODES[0],
    ) -> ExperimentSpec:
        """The experiment these choices describe, or ParamError / ValueError naming the first
        field that is wrong. `values` is the typed list (`2,16`, as `--values` and New experiment
        take it) or the values themselves; `base_config` is NAME -> value, typed or as text.
        A flag outside the curated table is resolved by `catalog`, else by the engine's catalog
        cached in the store at `db_path` (read from the engine when missing)."""
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise ValueError(f"repeats must be a whole number of at least 1, got {repeats!r}")
        if base_url is None and engine is None:
            raise ValueError("an experiment needs an engine to start or a base URL to attach to")
        base = dict(base_config or {})
        if isinstance(values, str) and too_deep(values):  # bounded before a parser recurses
            raise ParamError(f"{param.strip()}: {nesting_words()}")
        for key, raw in base.items():
            if isinstance(raw, str) and too_deep(raw):
                raise ParamError(f"baseline {key}: {nesting_words()}")
        learned: dict[str, Param] = {}
        if engine is not None:
            from tuning.engine.learn import learned_flags

            learned = learned_flags(db_path, engine, [param, *base], catalog)
        p = get_param(param.strip().removeprefix("--"), learned)
        if base_url is not None and p.restarts_server:
            raise ValueError(
                f"{p.name} needs a server restart; an attached server (base URL) can only "
                "vary workload parameters: concurrency, input-len, output-len, "
                "shared-prefix-len"
            )
        typed = tuple(parse_values(p.name, values, learned))
        backend = engine.backend if engine else None
        config = validate_config({**(engine.baseline if engine else {}), **base}, backend, learned)
        if p.restarts_server:
            config.pop(p.name, None)
            check_starts(config, p, typed, backend)
        else:  # each value as it will be applied (a spec's knob, or the workload)
            from tuning.experiment.planned import apply_value

            for value in typed:
                apply_value(workload, workload_spec, p.name, value)
        if engine is not None:  # the flags it launches with travel with the experiment
            engine = replace(engine, learned={n: q.to_dict() for n, q in learned.items()})
        refuse_resident(resident, p, engine, repeats, auto)
        # a list value reads "1, 2, 4, 8": the values of a list-valued flag part with "; "
        shown = ("; " if p.type == "list" else ", ").join(
            show_value(p.name, v, learned) for v in typed
        )
        return cls(
            param=p,
            values=typed,
            workload=workload,
            engine=engine,
            config=config,
            repeats=repeats,
            auto=auto,
            base_url=base_url,
            model=model or (engine.served_model_name if engine else None),
            name=name or f"{p.name} = {shown}",
            author=author,
            host=host,
            workload_spec=workload_spec,
            resident=resident,
        )

    # -- what it asks for ---------------------------------------------------------------------
    @property
    def first_rounds(self) -> int:
        """The rounds planned at the start (until decided: its first rounds; the runner adds)."""
        return self.auto.first_rounds if self.auto else self.repeats

    @property
    def most_runs(self) -> int:
        """The most runs it may take (tuning.experiment.size)."""
        return experiment_runs(
            len(self.values), self.repeats, self.auto.max_repeats if self.auto else None
        )

    @property
    def restarts(self) -> bool:
        """Whether each run starts its own server."""
        return self.engine is not None and self.param.restarts_server

    @property
    def warning(self) -> str | None:
        """Why it cannot end in a verdict, in one line; None when it can."""
        if self.auto is None and self.repeats == 1 and len(self.values) > 1:
            return ONE_RUN
        return None

    # -- the checks that need the engine, and the row -----------------------------------------
    def check_with_engine(self) -> None:
        """The flags of the user's vLLM it sets (the parameter's values, the baseline's learned
        flags) through the engine's own parser; ParamError with vLLM's message."""
        if self.engine is None:
            return
        from tuning.engine.parser_check import check_with_engine

        checks = [(self.param.name, self.values), *((k, [v]) for k, v in self.config.items())]
        check_with_engine(self.engine, self.engine.learned_params(), checks)

    def row(self) -> NewExperiment:
        """The store's row for it (store.repo.create_experiment)."""
        auto = self.auto
        return NewExperiment(
            param=self.param.name,
            values=self.values,
            name=self.name,
            repeats=self.first_rounds,
            config=dict(self.config),
            workload=self.workload.to_dict(),
            workload_spec=self.workload_spec.to_dict() if self.workload_spec else None,
            engine=self.engine.to_json() if self.engine else None,
            base_url=self.base_url,
            model=self.model,
            author=self.author,
            host=self.host,
            repeats_auto=auto is not None,
            max_repeats=auto.max_repeats if auto else None,
            budget_minutes=auto.budget_minutes if auto else None,
            resident=self.resident,
        )

    # -- the command line ---------------------------------------------------------------------
    @staticmethod
    def add_cli_args(p: argparse.ArgumentParser) -> None:
        """The flags that define an experiment (the command adds its own: --resume, --json...)."""
        p.add_argument("--param", default=None, help="the one parameter to vary (required)")
        p.add_argument(
            "--values",
            default=None,
            help="comma-separated, e.g. 2,16 (required); a JSON value keeps its commas, and text "
            "that holds a comma goes in double quotes: '\"AWS_,HF_\",OTHER_' is two values; a "
            "flag of several values takes each as a list: '[1,2,4,8],[1,2,4,8,16,32]' is two",
        )
        p.add_argument(
            "--set", action="append", metavar="NAME=VALUE", help="baseline server parameter"
        )
        p.add_argument(
            "--repeats",
            type=repeats_arg,
            default=AUTO,
            metavar="N|auto",
            help="runs per value: 'auto' (the default) repeats the values still undecided "
            "against the baseline (the first value) until decided (A/A false-alarm rate <= 5 %%); "
            "N: exactly N runs a value, counterbalanced (A B B A); one run a side cannot decide",
        )
        p.add_argument(
            "--max-repeats",
            type=int,
            default=None,
            metavar="N",
            help=f"until decided: at most N runs a value (default {DEFAULT_MAX_REPEATS})",
        )
        p.add_argument(
            "--budget-minutes",
            type=float,
            default=None,
            metavar="M",
            help="until decided: add a round only when the estimate says it fits in M minutes "
            f"(default {DEFAULT_BUDGET_MINUTES:g}; 0: no budget)",
        )
        p.add_argument(
            "--base-url", default=None, help="attach to a running server (workload parameters only)"
        )
        p.add_argument("--model", default=None)
        p.add_argument("--name", default=None)
        p.add_argument(
            "--resident",
            choices=RESIDENT_MODES,
            default=RESIDENT_MODES[0],
            help="repeats of a flag that does not size memory, on a vLLM with sleep mode (CUDA) "
            "or a CPU vLLM: start each value's server once and switch them by sleep / wake "
            "(CPU: pause / continue) instead of restarting, with a real restart every few "
            "rounds and a check that both give equivalent numbers; auto (the default): when "
            "allowed, saying why not once; off: always restart",
        )
        add_workload_arguments(p)
        TrafficOptions.add_cli_args(p)

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace, db_path: Path) -> ExperimentSpec:
        """The experiment a parsed command line asks for, checked by the engine's own parser
        too; ValueError / ParamError (a WorkloadError or TrafficError is one) naming the flag."""
        from tuning.engine.current import current_spec
        from tuning.settings import load_settings

        if not args.param or not args.values:
            raise ValueError("--param and --values are required (or --resume ID)")
        repeats, auto = repeats_from_args(args)
        settings = load_settings()
        base, errors = parse_assignments(args.set or [], "--set")
        if errors:
            raise ParamError("; ".join(errors))
        spec = cls.build(
            param=args.param,
            values=args.values,
            workload=workload_from_args(args),
            engine=None if args.base_url else current_spec(settings),
            base_config=base,
            repeats=repeats,
            auto=auto,
            base_url=args.base_url,
            model=args.model,
            name=args.name,
            author=settings.resolved_author(),
            host=settings.resolved_host(),
            workload_spec=TrafficOptions.from_cli_args(args).to_spec(db_path),
            db_path=db_path,
            resident=getattr(args, "resident", RESIDENT_MODES[0]),
        )
        spec.check_with_engine()  # any flag of the engine's own vLLM, before anything starts
        return spec


def refuse_resident(
    mode: str, param: Param, engine: EngineSpec | None, repeats: int, auto: AutoRepeats | None
) -> None:
    """ValueError naming --resident for a mode it does not know, or `on` where resident engines
    cannot be used whatever the engine (no engine, a workload parameter, one run a value, a flag
    that sizes memory, neither CUDA nor a CPU vLLM); whether a CUDA vLLM has sleep mode is the
    runner's to read (tuning.experiment.resident), said there."""
    if mode not in RESIDENT_MODES:
        raise ValueError(f"--resident: {mode!r} is not one of {', '.join(RESIDENT_MODES)}")
    if mode != "on":
        return
    from tuning.engine.sleep_mode import SLEEP_FLAG, why_not

    why: str | None = None
    if engine is None or not param.restarts_server:
        why = "there is no server restart to save (an attached server or a workload parameter)"
    elif auto is None and repeats < 2:
        why = "one run a value has no repeats to switch"
    else:
        why = why_not(param.name, engine.backend, {SLEEP_FLAG})  # its flags: the runner's
    if why:
        raise ValueError(f"--resident on: {why}")


def repeats_arg(text: str) -> int | str:
    """An argparse type: 'auto' or a whole number >= 1 (`--repeats -5` is an error)."""
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of runs or 'auto'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def repeats_from_args(
    args: argparse.Namespace, resuming: bool = False
) -> tuple[int, AutoRepeats | None]:
    """(a fixed count, None) or (1, the until-decided settings) of --repeats, --max-repeats and
    --budget-minutes (the budget defaults to DEFAULT_BUDGET_MINUTES; 0 is none); ValueError for
    a limit given with a fixed count (a resumed experiment keeps its own --repeats)."""
    from tuning.experiment.repeats import AutoRepeats

    if args.repeats != AUTO:
        limits = args.max_repeats is not None or args.budget_minutes is not None
        if limits and not resuming:
            raise ValueError("--max-repeats and --budget-minutes need --repeats auto")
        return int(args.repeats), None
    budget = DEFAULT_BUDGET_MINUTES if args.budget_minutes is None else args.budget_minutes
    return 1, AutoRepeats(
        max_repeats=DEFAULT_MAX_REPEATS if args.max_repeats is None else args.max_repeats,
        budget_minutes=budget or None,
    )
