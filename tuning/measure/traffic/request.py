"""The materialized request list: what the load generator sends, one `PlannedRequest` per request.

A request is a list of chat messages; the completions endpoint gets their contents joined with
nothing in between (`render_text`), the chat endpoint gets them as messages (`render_messages`).
A later turn of a conversation carries the whole history: the system prompt, every earlier user
message and, between them, an assistant message standing for each earlier answer. The real
answers are only known at run time, so the plan holds placeholders of exactly the answer's token
length (`output_len` of that turn, which `ignore_eos` makes the real length too); the load
generator keeps each conversation's real answer texts and passes them to `render_text` /
`render_messages` as `answers={turn: text}`, which put them in place of the placeholders. A turn
whose answer is missing (the request failed) keeps its placeholder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Message:
    """One chat message. `tokens` counts `content` alone, without special tokens.

    `answer_turn` marks an assistant placeholder: the turn (0-based) whose answer it stands for.
    """

    role: str
    content: str
    tokens: int
    answer_turn: int | None = None


@dataclass(frozen=True)
class PlannedRequest:
    """One request to send.

    - `index`: position in the plan; closed-loop dispatch order (conversation by conversation).
    - `conversation`, `turn`: turns of one conversation are sent in order, each after the
      previous one's answer plus `think_time_s`.
    - `input_len`: exact token count of `render_text()` of the plan's placeholders, re-encoded
      without special tokens (the server may add a BOS or a chat template on top; its usage
      says what it counted).
    - `output_len`: sent as `max_tokens` with `ignore_eos`.
    - `prefix_id`: which shared system prompt opens it (None: none); `hash_ids`: a trace's
      512-token block ids (equal ids, equal tokens).
    - `offset_s`: scheduled dispatch, seconds after the run starts, for open-loop and trace
      arrival (only first turns have one; later turns follow their answer); None in a closed loop.
    """

    index: int
    conversation: int
    turn: int
    messages: tuple[Message, ...]
    input_len: int
    output_len: int
    prefix_id: int | None = None
    hash_ids: tuple[int, ...] = ()
    offset_s: float | None = None
    think_time_s: float = 0.0

    @property
    def prompt(self) -> str:
        """The completions prompt with the plan's placeholder answers."""
        return render_text(self)


def _content(message: Message, answers: Mapping[int, str] | None) -> str:
    if answers is not None and message.answer_turn is not None:
        return answers.get(message.answer_turn, message.content)
    return message.content


def render_text(request: PlannedRequest, answers: Mapping[int, str] | None = None) -> str:
    """The completions prompt: every message's content in order, real answers in place."""
    return "".join(_content(m, answers) for m in request.messages)


def render_messages(
    request: PlannedRequest, answers: Mapping[int, str] | None = None
) -> list[dict[str, str]]:
    """The chat endpoint's `messages`, real answers in place."""
    return [{"role": m.role, "content": _content(m, answers)} for m in request.messages]
