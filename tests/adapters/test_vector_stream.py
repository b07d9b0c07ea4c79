"""Decoding a Prometheus vector answer a slice at a time gives what json.loads gives for the
whole answer, whatever the slices and the label values; anything else is refused."""

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuctl.adapters.core import vector_stream


def answer(result, compact=True, **extra) -> bytes:
    doc = {"status": "success", "data": {"resultType": "vector", "result": result}, **extra}
    separators = (",", ":") if compact else None  # Prometheus writes no spaces
    return json.dumps(doc, separators=separators, ensure_ascii=False).encode()


def decoded(body: bytes, chunk: int) -> list:
    batches = list(vector_stream.batches(io.BytesIO(body).read, chunk))
    return [item for batch in batches for item in batch]


def sample(i: int, **labels) -> dict:
    return {
        "metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": str(i), **labels},
        "value": [1.5, str(i)],
    }


# Label values that look like the boundary, quote, escape and multi-byte characters.
TRICKY = ['},{"metric":{', "\\", '"', '\\"},{"metric":', "é€😀", "\n\t\x00", "]}", ""]


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096, 1 << 20])
def test_any_slicing_gives_the_whole_answer(chunk):
    result = [sample(i, pod=TRICKY[i % len(TRICKY)]) for i in range(200)]
    assert decoded(answer(result), chunk) == result


def test_slices_are_bounded_by_what_is_read_not_by_the_answer():
    result = [sample(i, pad="x" * 100) for i in range(5000)]
    batches = list(vector_stream.batches(io.BytesIO(answer(result)).read, 4096))
    assert len(batches) > 100 and max(len(b) for b in batches) < 50
    assert [item for b in batches for item in b] == result


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.dictionaries(st.text(max_size=8), st.text(max_size=12), max_size=4), max_size=20),
    st.integers(min_value=1, max_value=300),
)
def test_label_values_of_any_text(labels, chunk):
    result = [{"metric": m, "value": [0, "1"]} for m in labels]
    assert decoded(answer(result), chunk) == result


@pytest.mark.parametrize(
    "body",
    [
        answer([sample(1), sample(2)], compact=False),  # spaces: decoded at the end, whole
        answer([sample(1)], warnings=["many series"], infos=["x"]),
        answer([]),
    ],
    ids=["indented", "warnings-after-the-result", "empty"],
)
def test_other_valid_answers(body):
    assert decoded(body, 16) == json.loads(body)["data"]["result"]


@pytest.mark.parametrize(
    "body",
    [
        b'{"status":"error","errorType":"bad_data","error":"parse error"}',
        b'{"data":{"resultType":"vector","result":[]},"status":"success"}',  # other key order
        b'{"status":"success","data":{"resultType":"matrix","result":[]}}',
        b'{"status":"success","data":{"resultType":"vector","result":{"a":1}}}',
        b"<html>sign in</html>",
        b"",
    ],
)
def test_anything_else_is_left_to_the_whole_answer_decoder(body):
    with pytest.raises(vector_stream.NotAVectorStream) as e:
        decoded(body, 8)
    assert e.value.head == body  # everything read so far, to decode it whole


@pytest.mark.parametrize(
    "body",
    [
        answer([sample(1), sample(2)])[:-20],  # cut short
        answer([sample(1), sample(2)])[:-2] + b"]]}",  # does not close the answer
        answer([sample(1)]).replace(b'"value"', b'"value":', 1),
    ],
    ids=["truncated", "bad-end", "bad-element"],
)
def test_malformed_answers_are_errors(body):
    with pytest.raises(ValueError):
        decoded(body, 32)
