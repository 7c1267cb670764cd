"""The demo's memory rules, no LLM: which sentences are memories, their kind and key,
and how a remembered sentence becomes an answer."""

from __future__ import annotations

import hashlib
import re

_SENTENCES = re.compile(r"[^.!?]+[.!?]*")
_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^i(?: am|'m) allergic\b|^i (?:can't|cannot|don't) eat\b", re.I), "health"),
    (
        re.compile(
            r"^i (?:really |do )?(?:like|love|enjoy|prefer|adore|hate|dislike)\b|^i (?:don't|do not) like\b"
            r"|^my favou?rite\b",
            re.I,
        ),
        "preference",
    ),
    (re.compile(r"^i work\b|^i(?: am|'m) an? \w+$|^my (?:job|work|boss|office)\b", re.I), "work"),
    (
        re.compile(
            r"^my (?:mother|father|mom|mum|dad|sister|brother|wife|husband|partner|son|daughter|"
            r"grand\w+|aunt|uncle|cousin|friend|family|kids?|children|parents?)\b",
            re.I,
        ),
        "family",
    ),
)
_FIRST_PERSON = re.compile(r"^(?:i|i'm|i've|i'd|my)\b", re.I)
_SWAPS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bI am\b"), "you are"),
    (re.compile(r"\bI'm\b"), "you're"),
    (re.compile(r"\bI was\b"), "you were"),
    (re.compile(r"\bI've\b"), "you've"),
    (re.compile(r"\bI\b"), "you"),
    (re.compile(r"\bmy\b", re.I), "your"),
    (re.compile(r"\bmine\b", re.I), "yours"),
    (re.compile(r"\bmyself\b", re.I), "yourself"),
    (re.compile(r"\bme\b", re.I), "you"),
)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCES.findall(text) if s.strip()]


def extract_memories(text: str) -> list[tuple[str, str]]:
    """First-person statements worth keeping, as ``(sentence, kind)``; questions are never kept.

    >>> extract_memories("Hi! I like pizza. My sister lives in Lisbon. What's up?")
    [('I like pizza', 'preference'), ('My sister lives in Lisbon', 'family')]
    """
    found: list[tuple[str, str]] = []
    for sentence in _sentences(text):
        if sentence.endswith("?"):
            continue
        body = sentence.rstrip(".!").strip()
        if not _FIRST_PERSON.match(body):
            continue
        kind = next((k for pattern, k in _KINDS if pattern.search(body)), "fact")
        found.append((body, kind))
    return found


def extract_questions(text: str) -> list[str]:
    """The sentences of ``text`` that end with a question mark."""
    return [s for s in _sentences(text) if s.endswith("?")]


def memory_key(text: str) -> str:
    """A stable key for a memory: the same sentence is one memory, however often it is said."""
    normal = " ".join(text.lower().split())
    return "m-" + hashlib.sha256(normal.encode()).hexdigest()[:12]


def answer_from_memory(text: str) -> str:
    """Turn a first-person memory into a second-person answer: "I like pizza" -> "You like pizza."."""
    out = text
    for pattern, repl in _SWAPS:
        out = pattern.sub(repl, out)
    out = out[:1].upper() + out[1:]
    return out if out.endswith((".", "!")) else out + "."
