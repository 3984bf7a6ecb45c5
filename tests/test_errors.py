"""The one error type's helpers: secrets redacted from every exception of a chain and from the Hub's logs."""

from __future__ import annotations

import errno
import logging
import traceback

import pytest

from scratchformer.errors import ScratchformerError, no_secrets, one_line, quoted, scrub

TOKEN = "hf_ChainSecret0123456789abcdefgh"
PASSWORD = "pa55w0rd-in-a-url"


class Request:
    """An http client's request: its text shows the URL, query string and all."""

    def __init__(self, url: str):
        self.url = url

    def __repr__(self) -> str:
        return f"<Request('GET', {self.url!r})>"


class Opaque(Exception):
    """A library error whose message is built from state that scrub cannot read as a secret (kept reversed)."""

    def __init__(self, secret: str):
        super().__init__()
        self._reversed = secret[::-1]

    def __str__(self) -> str:
        return f"Bearer {self._reversed[::-1]}"


def chain_text(error: BaseException) -> tuple[str, int]:
    """Everything a script could print of ``error``: its traceback, and each chained exception's message, repr and
    attributes (shown by the traceback or not); and how many exceptions the chain holds."""
    texts, chain, pending = ["".join(traceback.format_exception(error))], [], [error]
    while pending:
        current = pending.pop()
        if current is None or any(current is seen for seen in chain):
            continue
        chain.append(current)
        texts += [str(current), repr(current), *map(repr, vars(current).values()), *getattr(current, "__notes__", [])]
        pending += [current.__cause__, current.__context__]
    return "\n".join(texts), len(chain)


def raise_a_chain() -> None:
    """A ScratchformerError that chains a library's errors, each holding a secret somewhere else."""
    try:
        try:
            try:
                raise Opaque(TOKEN)
            except Opaque as opaque:
                error = OSError(errno.ENOENT, f"cannot reach http://alice:{PASSWORD}@hub", f"/x?token={TOKEN}")
                error.request = Request(f"http://hub/?token={TOKEN}")
                error.add_note(f"sent Authorization: Bearer {TOKEN}")
                raise error from opaque
        except OSError as error:
            raise RuntimeError("404 for the repo", {"authorization": f"Bearer {TOKEN}"}) from error
    except RuntimeError as error:
        raise ScratchformerError(f"cannot load me/x ({error})") from error


def test_scrub_redacts_every_exception_of_the_chain_and_cuts_what_it_cannot():
    """A server that echoes the request's headers put 'Bearer hf_...' into the chained exceptions of our one-line
    error, where a script's traceback shows them. scrub redacts each exception of the chain in place (arguments, an
    OSError's strerror and filename, notes, attributes such as an http request) and cuts a link whose message it
    cannot reach; the rest of the chain stays, for debugging."""
    with pytest.raises(ScratchformerError) as caught:
        raise_a_chain()
    text, length = chain_text(caught.value)
    assert TOKEN in text and PASSWORD in text and length == 4  # what a script printed
    assert scrub(caught.value) is caught.value
    text, length = chain_text(caught.value)
    assert TOKEN not in text and PASSWORD not in text, text
    assert length == 3, text  # the Opaque error is cut; our error, the RuntimeError and the OSError stay
    assert "cannot reach http://***@hub" in text and "/x?token=***" in text and "token=***')>" in text
    assert "sent Authorization: ***" in text and "{'authorization': '***'}" in text
    assert isinstance(caught.value.__cause__.__cause__, OSError) and caught.value.__cause__.__cause__.errno == 2


def test_no_secrets_redacts_the_hub_logs_and_what_leaves_the_block(monkeypatch):
    """While a Hub operation runs, huggingface_hub logs each retry with its URL; a token given to the block, and the
    one in HF_TOKEN, are redacted from those records and from the exception that ends it; the filters go after."""
    monkeypatch.setenv("HF_TOKEN", "env-secret-value-1234")
    records: list[str] = []
    recorder = logging.Handler()
    recorder.emit = lambda record: records.append(record.getMessage())
    logger = logging.getLogger("huggingface_hub.utils._http")
    logger.addHandler(recorder)
    logger.setLevel(logging.INFO)
    try:
        with pytest.raises(ScratchformerError) as caught, no_secrets("given-secret-5678"):
            logger.warning("Retrying in 1s: POST http://u:%s@hub/api?token=%s", PASSWORD, "given-secret-5678")
            raise_a_chain()
        logger.warning("after the block: %s", "given-secret-5678")
    finally:
        logger.removeHandler(recorder)
        logger.setLevel(logging.NOTSET)
    assert records == ["Retrying in 1s: POST http://***@hub/api?token=***", "after the block: given-secret-5678"]
    text, _ = chain_text(caught.value)
    assert TOKEN not in text and PASSWORD not in text
    with no_secrets():
        pass  # a block that ends well changes nothing
    assert not logger.filters


def test_one_line_joins_a_message_of_several_lines_and_redacts_it():
    error = ValueError(f"All the data files must have the same columns,\n  but  {TOKEN} differs\n\tsee the docs")
    assert one_line(error) == "All the data files must have the same columns, but hf_*** differs see the docs"


def test_quoted_cuts_a_long_value_and_says_its_length():
    assert quoted("the bank") == "'the bank'"
    assert quoted("x" * 80) == repr("x" * 80)  # up to the limit, whole
    assert quoted("ab" * 50, limit=4) == "'abab'... (100 characters)"
    assert quoted(("s" * 10_000,), limit=5) == "('sss... (10,005 characters)"  # another object: its repr, cut
    assert quoted([1, 2]) == "[1, 2]"
