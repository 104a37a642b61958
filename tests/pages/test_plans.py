"""Issue 23 item 5, "a plan likewise" (AppTest): the Searches page lists the stored plans and
shows the chosen one as `plan show` does: the parameters in order, each search's chosen value
with a link to its search, start vs recommended, the gain with its interval and verdict (green
when decided better, the neutral grey when undecided), and the `vllm serve` command."""

from __future__ import annotations

from pathlib import Path

from store import connect, repo
from tests.apptest import frame_with, open_page, page_text, with_query
from tests.factories import add_plan, plan_result
from tuning.decide.search.driver import SearchSpec
from tuning.decide.search.record import spec_json
from tuning.decide.search.strategy import Space
from tuning.measure.traffic.workload import Workload


def _a_search(db_path: Path) -> int:
    """A recorded search (no step run yet) for the plan's first step to link to."""
    spec = SearchSpec(
        param="max-num-seqs",
        space=Space(1, 64, True),
        objective="output_throughput",
        workload=Workload(num_requests=8, concurrency=4, input_len=8, output_len=4),
        engine=None,
    )
    with connect(db_path) as db:
        return repo.create_search(
            db, key=spec.key(), param=spec.param, spec_json=spec_json(spec), status="done"
        )


def test_the_page_shows_a_plans_recommendation_and_its_gain(fresh_db: Path) -> None:
    search_id = _a_search(fresh_db)
    plan_id = add_plan(fresh_db, plan_result(search_ids=(search_id, None)))
    at = open_page("app_pages/7_Searches.py")
    assert [h.value for h in at.header] == ["Plans"]
    assert at.selectbox(key="plans_pick").value == plan_id
    text = page_text(at).replace("\\", "")  # as read: without Markdown's escapes
    assert f"plan {plan_id}: max-num-seqs, then block-size" in [s.value for s in at.subheader]
    gain = next(m.value for m in at.markdown if m.value.startswith("Gain over the start"))
    assert gain.replace("\\", "") == (
        "Gain over the start, :green[**output throughput: 1,000 tok/s → 1,210 tok/s, "
        "+21.0 %: ▲ better (95 % CI +13.0 … +29.0 %)**]"
    )
    assert ":gray[mean TTFT: 1,000 ms → 970 ms, -3.0 %: undecided" in text  # grey, not green
    config = frame_with(at, "recommended")
    rows = {r["parameter"]: (r["start"], r["recommended"]) for _, r in config.iterrows()}
    assert rows == {
        "block-size": ("unset", "32"),
        "concurrency": ("4", "4"),
        "max-num-seqs": ("unset", "16"),
    }
    steps = frame_with(at, "chosen")
    assert list(steps["parameter"]) == ["max-num-seqs", "block-size"]
    assert list(steps["chosen"]) == ["16", "32"] and steps["search"].iloc[0] == search_id
    assert [c.value for c in at.code] == ["vllm serve m --max-num-seqs 16 --block-size 32"]
    links = {link.proto.label: link.proto.query_string for link in at.get("page_link")}
    assert links[f"Search {search_id}: max-num-seqs"] == f"search={search_id}"
    assert "Behind the gain: runs 5, 8 (start) vs 6, 7 (recommended)" in text


def test_a_plan_is_opened_from_its_link_and_a_lab_without_plans_says_so(fresh_db: Path) -> None:
    at = open_page("app_pages/7_Searches.py")
    assert "No plan yet" in page_text(at) and not at.code
    first = add_plan(fresh_db)
    assert add_plan(fresh_db) == first  # the same plan again: its row
    newer = add_plan(fresh_db, seqs=(1, 128))
    assert add_plan(fresh_db) == first and newer != first
    assert open_page("app_pages/7_Searches.py").selectbox(key="plans_pick").value == newer
    at = open_page("app_pages/7_Searches.py", with_query("plan", first))
    assert at.selectbox(key="plans_pick").value == first
    assert "vllm serve m --max-num-seqs 16 --block-size 32" in [c.value for c in at.code]
