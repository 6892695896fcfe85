r"""Queries an exported model on TF Serving, over gRPC (default) or REST: the library
of the query command (electra_tf/query.py).

    python -m export.client --server=localhost:8500 --model_name=ner --text="Zoë lives in Zürich"
    python -m export.client --server=localhost:8501 --rest --model_name=mrpc \
        --text="A first sentence." --text_pair="A second one."
    python -m export.client --server=localhost:8500 --model_name=squad \
        --question="Who lives in Zürich?" --context="Zoë lives in Zürich."

--text (and --text_pair, --question, --context) may be repeated for a batch.
An ids-only export (--ids_only, for servers without TF-Text ops) takes ids:
--input_word_ids=2,1037,3 (and optionally --input_mask, --input_type_ids), one
row per flag, or --text (and the others) with --export_dir=MODEL_BASE/NAME/N,
tokenized here with the export's assets/vocab.txt and casing:

    python -m export.client --server=localhost:8500 --model_name=ner_ids \
        --export_dir=/models/ner_ids/1 --text="Zoë lives in Zürich"

Prints the response as JSON: {"outputs": {name: nested lists}} (strings are
decoded as UTF-8, with U+FFFD for invalid bytes; characters a terminal could
act on, such as escape sequences, are written as JSON escapes). gRPC uses
tensorflow_serving.apis PredictionService/Predict; REST posts the column
format {"signature_name": ..., "inputs": {...}} to
/v1/models/NAME[/versions/N]:predict.

A server is not trusted: --timeout bounds the whole request (connecting,
sending, and the answer however slowly it comes), an answer may hold at most
MAX_ANSWER_BYTES bytes (and over gRPC MAX_ANSWER_VALUES values, over REST
MAX_DEPTH levels of JSON nesting), an output must be a tensor of numbers or
strings, and what the server says in an error is quoted with repr. Each of
these ends in one `error: ...` line and exit status 1; a bad flag
(--timeout <= 0 or over a day, an empty --server, a REST --model_name that
a URL path cannot hold, ids outside int32 or a mask other than 0/1, a --text
that is not UTF-8, counts that do not match) in one line and exit status 2,
before anything is sent.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import re
import socket
import threading

from electra_tf.core.errors import InputError

MAX_ANSWER_BYTES = 64 << 20  # the largest answer read: a REST body, a gRPC message
# values over all outputs of one gRPC answer, once decoded: as many float32s as
# MAX_ANSWER_BYTES hold (1 << 22 had refused a 9-tag tagger's answer to 400 rows of 512)
MAX_ANSWER_VALUES = MAX_ANSWER_BYTES // 4
MAX_DEPTH = 64  # nesting of a REST answer's JSON (a tensor has a few dimensions)
QUOTED_CHARS = 300  # of a server's message, quoted in an error
MAX_TIMEOUT_S = 86_400  # --timeout: a day (larger ones overflow the timer and gRPC's deadline)
INT32_MAX = 2**31 - 1  # ids travel as int32
MAX_SEQ_LENGTH = 65_536  # an export_info.json's window, beyond any position table's


class ClientError(RuntimeError):
    """The server refused or failed the request, or answered what a model does not;
    the message says why, quoting the server's words with repr."""


def _quoted(said) -> str:
    """repr of what a server said (a str, bytes or a JSON value), cut to about
    QUOTED_CHARS: escape sequences in it cannot act on the terminal that prints it."""
    if not isinstance(said, (str, bytes)):
        text = repr(said)
        return text[:QUOTED_CHARS] + (" ..." if len(text) > QUOTED_CHARS else "")
    cut = said[:QUOTED_CHARS]
    return repr(cut) + (f" (+{len(said) - len(cut)} more)" if len(said) > len(cut) else "")


def check_timeout(timeout) -> float:
    """--timeout as seconds (InputError: not a positive number up to MAX_TIMEOUT_S)."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not math.isfinite(timeout) or not 0 < timeout <= MAX_TIMEOUT_S:
        raise InputError(f"--timeout must be a positive number of seconds, at most "
                         f"{MAX_TIMEOUT_S:,} (a day), got {timeout!r}")
    return float(timeout)


def check_request(server: str, model_name: str, rest: bool,
                  version: int | None = None, signature: str = "serving_default") -> None:
    """--server, --model_name, --model_version and --signature_name, before anything is
    sent.

    Raises:
      InputError: one that is not UTF-8 (gRPC's and REST's requests carry UTF-8
        only), an empty --server or --model_name, a server given as a URL
        (http://...) or with a path, or without a port (gRPC had asked 443, REST 80;
        gRPC's own targets, dns:///... and unix:..., pass), a port outside 1-65535 (the
        socket layer took 84107 as 18571), a version outside TF Serving's int64, or
        (REST) a model name that its URL path cannot hold: TF Serving's REST path
        takes the name up to the next '/' or ':', '?', '#', '%', spaces and control
        characters would change the URL, and HTTP's request line is ASCII.
    """
    for flag, value in (("--server", server), ("--model_name", model_name),
                        ("--signature_name", signature)):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"{flag}={_quoted(value)} is not UTF-8 text") from None
    if not server.strip():
        raise InputError("--server is empty: give HOST:PORT (gRPC 8500, REST 8501 by default)")
    if _WEB_SCHEME.match(server):  # REST had asked http://http://...
        raise InputError(f"--server={server!r}: give HOST:PORT, without {server.split(':')[0]}:// "
                         "(the client writes the URL itself)")
    if any(c.isspace() or not c.isprintable() for c in server):  # (gRPC: a DNS lookup)
        raise InputError(f"--server={server!r} holds a space or control character: give "
                         "HOST:PORT")
    if "/" in server and "://" not in server and not server.startswith("unix:"):
        # (host:8501/v1/models/m had been said to name no port)
        raise InputError(f"--server={server!r}: give HOST:PORT, without a path (the client "
                         "writes the URL itself; --model_name names the model)")
    port = _PORT.search(server)
    if port and not server[:port.start()].strip("[]"):  # (gRPC had tried to resolve it)
        raise InputError(f"--server={server!r} names no host: give HOST:PORT (localhost:"
                         f"{port.group(1)} for this machine)")
    if not port and (rest or "://" not in server and not server.startswith("unix:")):
        raise InputError(f"--server={server!r} names no port: give HOST:PORT (gRPC 8500, "
                         "REST 8501 by default; without one the client had asked port "
                         f"{80 if rest else 443})")
    if port and not 1 <= int(port.group(1)) <= 65535:
        raise InputError(f"--server={server!r}: port {port.group(1)} is outside 1-65535")
    if not model_name:
        raise InputError("--model_name is required")
    if rest and _NOT_IN_REST_PATH.search(model_name):
        raise InputError(f"--model_name={_quoted(model_name)} cannot be asked over REST: its "
                         "URL path holds only ASCII, and no '/', ':', '?', '#', '%', space or "
                         "control character (use gRPC, or the name the server's model config "
                         "gives)")
    if version is not None and not 0 <= version <= 2**63 - 1:
        raise InputError(f"--model_version must be in [0, 2^63 - 1] (TF Serving's versions "
                         f"are int64 folder names), got {version}")


_NOT_IN_REST_PATH = re.compile(r"[/:?#%\s\x00-\x1f\x7f-\U0010ffff]")
_PORT = re.compile(r":([0-9]+)$")  # HOST:PORT, [v6]:PORT
_WEB_SCHEME = re.compile(r"https?://", re.IGNORECASE)


def _to_python(value):
    """numpy values -> JSON-able Python (bytes decoded as UTF-8)."""
    import numpy as np

    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return [_to_python(v) for v in value.tolist()] if value.ndim else _to_python(
                value.item())
        return value.tolist()
    if isinstance(value, list):
        return [_to_python(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def predict_grpc(server: str, model_name: str, inputs: dict, signature_name: str =
                 "serving_default", version: int | None = None, timeout: float = 30.0) -> dict:
    """PredictionService.Predict over an insecure channel; returns {name: np.ndarray}.

    `timeout` is the call's deadline (connecting included); the answer may be at
    most MAX_ANSWER_BYTES long and its outputs are checked (`_output_array`).

    Raises:
      InputError: a bad timeout.
      ClientError: the call failed (its status and the server's details, quoted),
        or an output is not a tensor of numbers or strings of a sane size.
    """
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    timeout = check_timeout(timeout)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    if version is not None:
        request.model_spec.version.value = int(version)
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    options = [("grpc.max_receive_message_length", MAX_ANSWER_BYTES)]
    with grpc.insecure_channel(server, options=options) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        try:
            response = stub.Predict(request, timeout=timeout)
        except grpc.RpcError as e:
            raise ClientError(f"gRPC {e.code().name}: {_quoted(e.details() or '')}") from None
    budget = [MAX_ANSWER_VALUES]
    return {k: _output_array(k, v, budget) for k, v in response.outputs.items()}


# What an output may be: numbers and strings (DataType numbers of tensorflow's types.proto).
_OUTPUT_DTYPES = {1: "DT_FLOAT", 2: "DT_DOUBLE", 3: "DT_INT32", 4: "DT_UINT8", 5: "DT_INT16",
                  6: "DT_INT8", 7: "DT_STRING", 9: "DT_INT64", 10: "DT_BOOL", 14: "DT_BFLOAT16",
                  17: "DT_UINT16", 19: "DT_HALF", 22: "DT_UINT32", 23: "DT_UINT64"}


def _output_array(name: str, proto, budget: list[int]):
    """One output's TensorProto -> np.ndarray, after checking what the server claims.

    tf.make_ndarray trusts the proto: it pads a short list of values out to the
    claimed shape (TF's compressed form), so one value under a shape of 1e12
    elements allocates terabytes. Here the dtype must be one of numbers or
    strings, the shape's dimensions non-negative, and the values (`budget`[0],
    what is left of MAX_ANSWER_VALUES for this answer) and padded strings'
    bytes (MAX_ANSWER_BYTES) bounded before it decodes.

    Raises:
      ClientError: naming the output (repr) and what is wrong.
    """
    import tensorflow as tf

    what = f"gRPC: output {_quoted(name)}"
    if proto.dtype not in _OUTPUT_DTYPES:
        from tensorflow.core.framework import types_pb2

        kind = types_pb2.DataType.Name(proto.dtype) if proto.dtype in \
            types_pb2.DataType.values() else str(proto.dtype)
        raise ClientError(f"{what} has dtype {kind}, not a tensor of numbers or strings")
    shape = [d.size for d in proto.tensor_shape.dim]
    values = math.prod(shape)
    if proto.tensor_shape.unknown_rank or any(d < 0 for d in shape):
        raise ClientError(f"{what} has shape {shape}, which no tensor has")
    if values > budget[0]:
        before = MAX_ANSWER_VALUES - budget[0]  # (outputs come in no fixed order)
        raise ClientError(f"{what} claims shape {shape}: {values:,} values"
                          + (f" ({before + values:,} with the outputs before it)"
                             if before else "")
                          + f", more than the {MAX_ANSWER_VALUES:,} an answer may hold; send "
                          "fewer rows a request")
    budget[0] -= values
    if proto.dtype == 7 and proto.string_val:
        strings = proto.string_val
        size = sum(map(len, strings)) + max(0, values - len(strings)) * len(strings[-1])
        if size > MAX_ANSWER_BYTES:
            raise ClientError(f"{what} holds strings of more than {MAX_ANSWER_BYTES} bytes "
                              f"(shape {shape})")
    try:
        return tf.make_ndarray(proto)
    except (ValueError, TypeError, IndexError, OverflowError) as e:  # (Overflow: 300 as uint8)
        said = " ".join(str(e).split())
        raise ClientError(f"{what} is a malformed tensor of shape {shape} "
                          f"({type(e).__name__}: {_quoted(said)})") from None


def _json_value(v):
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:  # binary strings travel as {"b64": ...}
            return {"b64": base64.b64encode(v).decode("ascii")}
    if isinstance(v, list):
        return [_json_value(x) for x in v]
    return v


def predict_rest(server: str, model_name: str, inputs: dict, signature_name: str =
                 "serving_default", version: int | None = None, timeout: float = 30.0) -> dict:
    """POST /v1/models/NAME[/versions/N]:predict (column format); returns {name: lists}.

    `timeout` bounds the whole request (`_post`); the answer must be JSON of at
    most MAX_ANSWER_BYTES bytes nested at most MAX_DEPTH deep.

    Raises:
      InputError: a bad timeout, or a --server that is not HOST:PORT.
      ClientError: no answer in time, an answer that is not TF Serving's (what the
        server said quoted with repr), or an HTTP error status.
    """
    import numpy as np

    timeout = check_timeout(timeout)
    path = f"/v1/models/{model_name}"
    if version is not None:
        path += f"/versions/{int(version)}"
    path += ":predict"
    url = f"http://{server}{path}"
    body = {"signature_name": signature_name,
            "inputs": {k: _json_value(np.asarray(v).tolist()) for k, v in inputs.items()}}
    status, data = _post(server, path, json.dumps(body).encode(), timeout)
    if status != 200:
        raise ClientError(f"REST {status}: {_error_text(data, url)}")
    try:
        answer = json.loads(data, object_pairs_hook=_rest_key_once)
    except RecursionError:
        raise ClientError(f"REST: {url} answered with JSON nested more than {MAX_DEPTH} "
                          "levels deep") from None
    except ValueError:
        raise ClientError(f"REST: {url} answered with a body that is not JSON: "
                          f"{_quoted(data.decode('utf-8', 'replace'))}") from None
    if _deeper_than(answer, MAX_DEPTH):
        raise ClientError(f"REST: {url} answered with JSON nested more than {MAX_DEPTH} "
                          "levels deep")
    outputs = answer.get("outputs") if isinstance(answer, dict) else None
    if outputs is None:
        raise ClientError(f"REST: no 'outputs' in the answer: {_quoted(answer)}")
    if not isinstance(outputs, dict):  # a single-output signature answers the bare value
        outputs = {"output": outputs}
    for name, value in outputs.items():
        _check_rest_tensor(name, value)
    return outputs


def _rest_key_once(pairs):
    """json.loads' object_pairs_hook: a REST answer's object naming a key twice is
    refused (json keeps the last, silently)."""
    value = dict(pairs)
    if len(value) < len(pairs):  # (a set: the server may send a million keys)
        seen = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ClientError(f"REST: the answer's JSON names {_quoted(twice)} twice in one "
                          "object, which no tensor does")
    return value


def _check_rest_tensor(name: str, value) -> None:
    """Refuses a REST output that is no tensor of numbers or strings: the column
    format's values are nested lists of one length per level, with numbers, booleans,
    strings or {"b64": string} at the bottom (no recursion: the answer is the server's).

    Raises:
      ClientError: naming the output (repr).
    """
    what = f"REST: output {_quoted(name)}"
    level = [value]
    while level:
        lists = [isinstance(v, list) for v in level]
        if any(lists) and not all(lists):
            raise ClientError(f"{what} mixes lists and values on one level, which no tensor does")
        if not any(lists):
            for v in level:
                if not (isinstance(v, (bool, int, float, str)) or isinstance(v, dict)
                        and list(v) == ["b64"] and isinstance(v["b64"], str)):
                    raise ClientError(f"{what} holds {_quoted(v)}, not a number or a string "
                                      "(an output must be a tensor of numbers or strings)")
            return
        if len({len(v) for v in level}) > 1:
            raise ClientError(f"{what} has rows of different lengths, which no tensor has")
        level = [x for v in level for x in v]


def _post(server: str, path: str, data: bytes, timeout: float) -> tuple[int, bytes]:
    """POSTs JSON `data` to http://server/path; returns (status, body).

    `timeout` is a deadline, not a per-read limit: a timer shuts the socket down
    when it passes, which ends any read in progress, so a server that sends one
    byte a second cannot hold the request; what came of the body by then is never
    taken for the answer, nor is a body shorter than its Content-Length. The body
    is read up to MAX_ANSWER_BYTES (a larger Content-Length is refused before reading).

    Raises:
      InputError: `server` is not HOST:PORT.
      ClientError: cannot connect, no whole answer before the deadline, an answer
        that is not HTTP, or one too long.
    """
    url = f"http://{server}{path}"
    try:
        conn = http.client.HTTPConnection(server, timeout=timeout)
    except http.client.InvalidURL as e:
        raise InputError(f"--server={server!r} is not HOST:PORT ({e})") from None
    expired = threading.Event()

    def expire():
        expired.set()
        if conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    late = ClientError(f"REST: no answer from {url} within --timeout={timeout:g}s")
    response, chunks = None, []  # the answer's head, once read; its body as it comes

    def unfinished():
        return ClientError(f"REST: the answer from {url} did not finish within "
                           f"--timeout={timeout:g}s (the deadline passed after "
                           f"{sum(map(len, chunks))} bytes of its body)")

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        try:
            conn.connect()
        except TimeoutError:
            raise late from None
        except UnicodeError as e:  # the resolver's IDNA: an empty label (a..b), one too long
            raise InputError(f"--server={server!r}: its host is not a valid host name "
                             f"({e})") from None
        except OSError as e:
            raise ClientError(f"REST: cannot reach {url}: {e.strerror or e}") from None
        if expired.is_set():  # it fired while connecting, with no socket to shut down
            raise late
        conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        body = _read_body(response, url, chunks)
        if expired.is_set():  # the shutdown ended the read: what came is not the answer
            raise unfinished()
        if response.length:  # http.client's read1(n) ends at EOF without a word
            raise http.client.IncompleteRead(body, response.length)
        return response.status, body
    except (OSError, http.client.HTTPException) as e:
        if expired.is_set() or isinstance(e, TimeoutError):
            # The deadline (or a read as long) ended a read that raised: before the
            # answer's head, no answer; after it, an unfinished one.
            raise (late if response is None else unfinished()) from None
        got = sum(map(len, chunks))  # (a chunked body's IncompleteRead holds none of it)
        if isinstance(e, http.client.IncompleteRead):
            short = f", {e.expected} short of what it announced" if e.expected else ""
            raise ClientError(f"REST: {url} closed the connection after "
                              f"{max(got, len(e.partial))} bytes of its answer's body{short}: "
                              "a truncated answer, not read as one") from None
        said = " ".join(str(e).split())
        if response is not None:  # it answered in HTTP: the body broke off
            raise ClientError(f"REST: the answer from {url} broke off after {got} bytes of "
                              f"its body ({type(e).__name__}: {_quoted(said)}): a truncated "
                              "answer, not read as one") from None
        raise ClientError(f"REST: {url} did not answer in HTTP ({type(e).__name__}: "
                          f"{_quoted(said)}); is --server TF Serving's REST port (8501; "
                          "gRPC is 8500)?") from None
    finally:
        timer.cancel()
        conn.close()


def _read_body(response, url: str, chunks: list) -> bytes:
    """The response's body, refused past MAX_ANSWER_BYTES (claimed, or as read); what
    is read lands in `chunks` as it comes (a read that raises leaves what came)."""
    claimed = (response.getheader("Content-Length") or "").strip()
    # ASCII digits: a header is read as Latin-1, and `²` passes str.isdigit, not int
    # (a traceback); a claim that is no number is left to the read, as http.client does
    if claimed.isascii() and claimed.isdigit() and int(claimed) > MAX_ANSWER_BYTES:
        raise ClientError(f"REST: {url} claims {int(claimed)} bytes, more than the "
                          f"{MAX_ANSWER_BYTES} an answer may hold")
    size = 0
    while chunk := response.read1(min(1 << 16, MAX_ANSWER_BYTES + 1 - size)):  # what came
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise ClientError(f"REST: {url} sent an answer of more than {MAX_ANSWER_BYTES} "
                              "bytes")
    return b"".join(chunks)


def _error_text(data: bytes, url: str) -> str:
    """What an HTTP error's body says, quoted: TF Serving's {"error": ...}, or the body,
    with a question about --server where it is not TF Serving's."""
    try:
        said = json.loads(data)["error"]
    except (ValueError, RecursionError, TypeError, KeyError):
        said = None
    return _quoted(data.decode("utf-8", "replace") if said is None else said) + (
        "" if said else f" ({url} answered, but not with TF Serving's {{\"error\": ...}}: "
                        "is --server TF Serving's REST port, 8501 by default?)")


def _deeper_than(value, limit: int) -> bool:
    """Whether JSON `value` nests lists and objects more than `limit` deep (no recursion:
    the answer is the server's)."""
    stack = [(value, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (list, dict)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict)
                                                  else value))
    return False


def text_inputs(text=(), text_pair=(), question=(), context=()) -> dict:
    """The text signature's inputs from the flag values (UTF-8 bytes; bytes pass as they are).

    Raises:
      InputError: the counts do not match, no text, or a str that is not UTF-8 (a
        command-line argument of other bytes reaches Python as lone surrogates).
    """
    import numpy as np

    def arr(values, flag):
        if isinstance(values, (str, bytes)):  # had been sent as one row per character
            raise InputError(f"--{flag} takes a list of texts, one per row, got a single "
                             f"{type(values).__name__}: give [{_quoted(values)}]")
        out = []
        for i, v in enumerate(values):
            if isinstance(v, str):
                try:
                    v = v.encode("utf-8")
                except UnicodeEncodeError:
                    raise InputError(f"--{flag} #{i + 1} is not UTF-8: {_quoted(v)}") from None
            out.append(v)
        return np.array(out, dtype=object)

    if (question or context) and (text or text_pair):  # the texts had been dropped unsent
        raise InputError("give --text (and --text_pair) or --question and --context, not both")
    if question or context:
        if len(question) != len(context) or not question:
            raise InputError("give as many --question as --context")
        return {"question": arr(question, "question"), "context": arr(context, "context")}
    if not text:
        raise InputError("give --text (or --question and --context)")
    inputs = {"text": arr(text, "text")}
    if text_pair:
        if len(text_pair) != len(text):
            raise InputError("give as many --text_pair as --text")
        inputs["text_pair"] = arr(text_pair, "text_pair")
    return inputs


IDS_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")  # signatures.IDS_INPUTS


def ids_inputs(input_word_ids=(), input_mask=(), input_type_ids=()) -> dict:
    """The ids signature's inputs (`serving_ids`, or an --ids_only export's
    `serving_default`) from the flag values: one row each, its ids comma-separated.

    Rows of different lengths are padded with id 0 and mask 0 to the longest; a row
    without --input_mask is all 1 (every id real), without --input_type_ids all 0.

    Raises:
      InputError: a value that is not a whole number, counts or row lengths that do
        not match, no row.
    """
    import numpy as np

    def rows(values, flag, allowed, what):
        out = []
        for i, row in enumerate(values):
            parts = [x for x in str(row).replace(" ", "").split(",") if x != ""]
            # ASCII digits only: int() also reads "1_000", "+1" and Arabic-Indic digits
            if not all(re.fullmatch(r"-?[0-9]+", x) for x in parts):
                raise InputError(f"--{flag} #{i + 1} is not comma-separated whole numbers: "
                                 f"{_quoted(row)}")
            out.append([int(x) for x in parts])
            bad = next((x for x in out[-1] if not allowed(x)), None)
            if bad is not None:
                raise InputError(f"--{flag} #{i + 1} holds {bad}: {what}")
        return out

    def id_range(x):
        return 0 <= x <= INT32_MAX

    ids = rows(input_word_ids, "input_word_ids", id_range,
               f"token ids are 0 to {INT32_MAX} (the vocabulary's row numbers)")
    if not ids or not all(ids):
        raise InputError("give --input_word_ids: one row of comma-separated ids per --input_"
                         "word_ids (e.g. --input_word_ids=2,1037,3)")
    given = {"input_mask": rows(input_mask, "input_mask", lambda x: x in (0, 1),
                                "a mask is 1 (a real token) or 0 (padding)"),
             "input_type_ids": rows(input_type_ids, "input_type_ids", id_range,
                                    f"segment ids are 0 to {INT32_MAX} (0 and 1 for "
                                    "ELECTRA)")}
    for name, values in given.items():
        if values and len(values) != len(ids):
            raise InputError(f"give as many --{name} as --input_word_ids ({len(values)} for "
                             f"{len(ids)})")
        for i, (row, id_row) in enumerate(zip(values, ids)):
            if len(row) != len(id_row):
                raise InputError(f"--{name} #{i + 1} has {len(row)} values, but --input_word_"
                                 f"ids #{i + 1} has {len(id_row)}")
    width = max(len(r) for r in ids)
    mask = given["input_mask"] or [[1] * len(r) for r in ids]
    types = given["input_type_ids"] or [[0] * len(r) for r in ids]
    return {name: np.array([r + [0] * (width - len(r)) for r in values], np.int32)
            for name, values in zip(IDS_INPUTS, (ids, mask, types))}


def tokenized_inputs(export_dir: str, text=(), text_pair=(), question=(), context=(),
                     notes: list | None = None) -> dict:
    """Text tokenized here, for a server without TF-Text ops: the ids signature's inputs,
    packed as the text signature packs a request (a SQuAD request: as it packs the
    first window of its context), with the export's own vocabulary and casing.

    `export_dir` is the export's version folder (MODEL_BASE/NAME/N, or a copy of its
    assets/vocab.txt and assets.extra/export_info.json). Single texts keep their first
    L - 2 pieces; pairs are cut longest first (BERT); a SQuAD question keeps at most
    the export's question_limit pieces (its max_query_length Q when Q + 3 < L, else
    (L - 3) // 2; min(Q, (L - 3) // 2) for an export that does not record it, Q 64
    for one that does not record Q), the context the rest: its first window (the
    text signature reads every window, `serving_ids` the one it is sent); L is the
    export's max_seq_length. `notes` gets a line for each text or context cut (the
    text signature's `truncated` output says so).

    Raises:
      InputError: the folder lacks those files, or the text flags do not match.
    """
    import os

    import numpy as np

    from electra_tf.tasks.base import pack_pair
    from electra_tf.text.tokenizer import Tokenizer
    from electra_tf.text.vocab import tokens_sha256

    vocab = os.path.join(export_dir, "assets", "vocab.txt")
    info_path, info = _export_info(export_dir, vocab)
    texts = text_inputs(text, text_pair, question, context)

    def field(name, ok, what, default=None):
        value = info.get(name, default) if isinstance(info, dict) else None
        if not ok(value):
            raise InputError(f"{info_path}: not an export's export_info.json ({name} "
                             f"{value!r} is not {what})")
        return value

    def whole(low, high):
        return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high

    # [CLS] a [SEP] (b [SEP]): a window holds the special tokens and a piece of each text
    length = field("max_seq_length", whole(3 if len(texts) == 2 else 2, MAX_SEQ_LENGTH),
                   f"a whole number of positions from 2 (3 for pairs) to {MAX_SEQ_LENGTH}")
    lower = field("do_lower_case", lambda v: isinstance(v, bool), "true or false")
    strip = field("strip_accents", lambda v: v is None or isinstance(v, bool),
                  "true, false or null")
    query = field("max_query_length", whole(1, MAX_SEQ_LENGTH), "a positive whole number", 64)
    # The cut the export's graph makes (tasks/squad.py question_limit); an export
    # written before it was recorded cut at min(Q, (L - 3) // 2).
    question_cut = field("question_limit", lambda v: v is None or whole(1, MAX_SEQ_LENGTH)(v),
                         "a positive whole number")
    if question_cut is None:
        question_cut = min(query, (length - 3) // 2)
    wanted = field("text_inputs", lambda v: v is None or (
        isinstance(v, list) and v and all(isinstance(n, str) for n in v)),
                   "a list of input names")  # None: an export older than the field
    if wanted is not None and list(texts) != wanted:
        flags_of = {"text": "--text", "text_pair": "--text_pair", "question": "--question",
                    "context": "--context"}
        raise InputError(
            f"--export_dir={export_dir} reads {' and '.join(flags_of.get(n, n) for n in wanted)}"
            f", not {' and '.join(flags_of[n] for n in texts)} (its export_info.json "
            "text_inputs): the ids would be packed for another model")
    recorded = field("vocab_sha256", lambda v: v is None or isinstance(v, str),
                     "a sha256")  # None: an export older than the field
    tokenizer = Tokenizer(vocab, do_lower_case=lower, strip_accents=strip)
    found = tokens_sha256(tokenizer.vocab)
    if recorded is not None and found != recorded:
        raise InputError(f"--export_dir={export_dir}: assets/vocab.txt is not the vocabulary "
                         f"the model was exported with (sha256 {found[:12]}, its "
                         f"export_info.json records {recorded[:12]}): the ids would be "
                         "another vocabulary's; give the export's own folder")
    pieces = [tokenizer.encode(list(v)) for v in texts.values()]
    cls, sep = tokenizer.cls_id, tokenizer.sep_id
    rows = []
    for i in range(len(pieces[0])):
        if "question" in texts:
            q = pieces[0][i][:question_cut]
            c = pieces[1][i][:length - len(q) - 3]
            if notes is not None and len(q) < len(pieces[0][i]):  # (SQuAD's `truncated`)
                notes.append(f"--question #{i + 1} holds {len(pieces[0][i])} pieces, more "
                             f"than the {question_cut} the export keeps of a question: cut "
                             f"to {question_cut}")
            if notes is not None and len(c) < len(pieces[1][i]):
                notes.append(f"--context #{i + 1} holds {len(pieces[1][i])} pieces, more than "
                             f"the {len(c)} of one window beside its question: the ids "
                             "signature answers from its first window only (the text "
                             "signature reads every window)")
            ids = [cls] + q + [sep] + c + [sep]
            pad = length - len(ids)
            rows.append((ids + [0] * pad, [1] * len(ids) + [0] * pad,
                         [0] * (len(q) + 2) + [1] * (len(c) + 1) + [0] * pad))
        else:
            # (a --text_pair of no piece is packed as no pair: pack_pair)
            pair = (pieces[1][i] or None) if len(pieces) == 2 else None
            held = sum(len(p) for p in (pieces[0][i], pair or ()))
            room = length - (3 if pair is not None else 2)
            if notes is not None and held > room:  # (the text signature's `truncated`)
                which = f"--text #{i + 1}" + (" and its --text_pair" if pair is not None
                                              else "")
                notes.append(f"{which} hold{'' if pair is not None else 's'} {held} pieces, "
                             f"more than the {room} of the export's window (max_seq_length "
                             f"{length}): cut to {room}"
                             + (", longest first" if pair is not None else ""))
            rows.append(pack_pair(pieces[0][i], pair, length, cls, sep))
    return {name: np.array([r[k] for r in rows], np.int32) for k, name in enumerate(IDS_INPUTS)}


def _export_info(export_dir: str, *needed: str) -> tuple[str, object]:
    """(path, parsed JSON) of an export's assets.extra/export_info.json; `needed`: other
    files the folder must hold. InputError: a file missing, or not JSON."""
    import os

    from electra_tf.core.fileio import parse_json

    info_path = os.path.join(export_dir, "assets.extra", "export_info.json")
    for path in (*needed, info_path):
        if not os.path.isfile(path):
            raise InputError(f"--export_dir={export_dir}: no {os.path.relpath(path, export_dir)}"
                             " (give the export's version folder, MODEL_BASE/NAME/N)")
    with open(info_path, "rb") as f:
        return info_path, parse_json(f.read().decode("utf-8", "replace"), info_path)


def ids_signature(export_dir: str, signature_name: str = "serving_default") -> str:
    """The signature that takes the ids `tokenized_inputs` packs: an --ids_only export's
    serving_default, a text export's serving_ids (its serving_default takes text),
    as its export_info.json lists them; `signature_name` where it takes ids.

    Raises:
      InputError: `signature_name`, given, takes no ids (or the folder lacks the file).
    """
    info_path, info = _export_info(export_dir)
    signatures = info.get("signatures") if isinstance(info, dict) else None
    if not isinstance(signatures, dict):  # an export older than the field: as asked
        return signature_name
    takes_ids = [name for name, inputs in signatures.items() if inputs == list(IDS_INPUTS)]
    if signature_name in takes_ids:
        return signature_name
    if signature_name == "serving_default" and takes_ids:
        return takes_ids[0]
    raise InputError(f"--signature_name={signature_name} does not take ids (--export_dir "
                     f"sends ids; {info_path} lists {', '.join(takes_ids) or 'none'} taking them)")


_UNSAFE = re.compile(r"[^\x20-\x7e]")  # where a character a terminal acts on may be


def answer_json(outputs: dict) -> str:
    """The line the command prints: {"outputs": {name: nested lists}}, names sorted.

    Strings are the server's: every character str.isprintable refuses (C0 and C1
    controls such as ESC and CSI, DEL, bidi overrides, ...) is written as a JSON
    escape, so the line cannot drive a terminal and reads back as the same JSON.
    """
    text = json.dumps({"outputs": {k: _to_python(v) for k, v in sorted(outputs.items())}},
                      ensure_ascii=False)
    return _UNSAFE.sub(lambda m: m[0] if m[0].isprintable() else json.dumps(m[0])[1:-1], text)
