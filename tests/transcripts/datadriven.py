"""The transcript format (after cockroachdb/datadriven, as etcd-io/raft's testdata/*.txt use it):
a file is a sequence of blocks, each a command line, a `----` separator and the output the
command must print, ended by a blank line (or the end of the file):

    # a comment line, kept as it is
    campaign 1
    ----
    1->2 VoteRequest pre epoch=1 last_epoch=0 leo=0
    1->3 VoteRequest pre epoch=1 last_epoch=0 leo=0

An output that itself holds blank lines is written between two double separators instead:
`----`, `----`, the output, `----`, `----`. An empty output is the separator and nothing else.

`run_transcript` executes every command against an environment and returns the file as it
would be with every expected output replaced by the actual one. The file is correct iff that
text equals the file: a mismatch is shown as a unified diff of the two, and rewriting a file
(KRAFTLAB_REWRITE_TRANSCRIPTS=1) is writing that text back. Comments and blank lines between
blocks survive a rewrite unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

SEPARATOR = "----"


class TranscriptError(Exception):
    """A transcript that cannot be run: bad syntax, unknown command, bad arguments. Raised, not
    printed, so a typo fails the test instead of being rewritten into the expected output."""


@dataclass(frozen=True, slots=True)
class Command:
    """`name pos1 pos2 key=value ...`: positional words in order, then key=value pairs."""

    name: str
    args: tuple[str, ...] = ()
    kwargs: dict[str, str] = field(default_factory=dict)
    line: int = 0  # 1-based line in the file, for error messages

    @classmethod
    def parse(cls, text: str, line: int = 0) -> Command:
        words = text.split()
        if not words:
            raise TranscriptError(f"line {line}: empty command")
        args: list[str] = []
        kwargs: dict[str, str] = {}
        for word in words[1:]:
            key, eq, value = word.partition("=")
            if eq:
                if not key or key in kwargs:
                    raise TranscriptError(f"line {line}: bad or repeated argument {word!r}")
                kwargs[key] = value
            else:
                args.append(word)
        return cls(words[0], tuple(args), kwargs, line)

    def int_arg(self, index: int) -> int:
        try:
            return int(self.args[index])
        except (IndexError, ValueError):
            raise TranscriptError(
                f"line {self.line}: {self.name} needs an integer argument #{index + 1}"
            ) from None

    def ints(self, key: str, default: tuple[int, ...] = ()) -> tuple[int, ...]:
        """`key=1,2,3` as a tuple of ints (`key=` is the empty tuple)."""
        raw = self.kwargs.get(key)
        if raw is None:
            return default
        try:
            return tuple(int(x) for x in raw.split(",") if x)
        except ValueError:
            raise TranscriptError(f"line {self.line}: {key}= needs integers, got {raw!r}") from None

    def check(self, positional: int | tuple[int, int], keys: frozenset[str] = frozenset()) -> None:
        """Refuse a wrong number of positional words or an unknown key (no silent typos)."""
        low, high = (positional, positional) if isinstance(positional, int) else positional
        if not low <= len(self.args) <= high:
            raise TranscriptError(
                f"line {self.line}: {self.name} takes {low}..{high} positional arguments, "
                f"got {list(self.args)}"
            )
        unknown = set(self.kwargs) - keys
        if unknown:
            raise TranscriptError(f"line {self.line}: {self.name}: unknown {sorted(unknown)}")


@dataclass(slots=True)
class Block:
    command: str
    expected: str  # without the trailing newline; "" for an empty output
    line: int


Chunk = str | Block  # verbatim text (comments, blank lines) or a command block


def parse(text: str) -> list[Chunk]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's final newline
    chunks: list[Chunk] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            chunks.append(line)
            i += 1
            continue
        start = i + 1
        if i + 1 >= len(lines) or lines[i + 1] != SEPARATOR:
            raise TranscriptError(f"line {start}: command {line!r} is not followed by {SEPARATOR}")
        i += 2
        out: list[str] = []
        if i < len(lines) and lines[i] == SEPARATOR:  # double separator: blank lines allowed
            i += 1
            while i + 1 < len(lines) and not (lines[i] == SEPARATOR == lines[i + 1]):
                out.append(lines[i])
                i += 1
            if i + 1 >= len(lines):
                raise TranscriptError(f"line {start}: unterminated {SEPARATOR} {SEPARATOR} block")
            i += 2
        else:
            while i < len(lines) and lines[i].strip():
                out.append(lines[i])
                i += 1
        chunks.append(Block(line, "\n".join(out), start))
    return chunks


def render(chunks: list[Chunk]) -> str:
    out: list[str] = []
    for chunk in chunks:
        if isinstance(chunk, str):
            out.append(chunk)
            continue
        out += [chunk.command, SEPARATOR]
        if any(not line.strip() for line in chunk.expected.split("\n")) and chunk.expected:
            out += [SEPARATOR, chunk.expected, SEPARATOR, SEPARATOR]
        elif chunk.expected:
            out.append(chunk.expected)
    return "\n".join(out) + "\n"


def _normalise(output: str) -> str:
    return "\n".join(line.rstrip() for line in output.rstrip("\n").split("\n")).strip("\n")


def run_transcript(text: str, handle: Callable[[Command], str]) -> str:
    """Run every block of `text` through `handle` and return the text with actual outputs."""
    chunks = parse(text)
    for chunk in chunks:
        if isinstance(chunk, Block):
            chunk.expected = _normalise(handle(Command.parse(chunk.command, chunk.line)))
    return render(chunks)
