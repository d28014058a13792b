#!/usr/bin/python3
"""The client side of serve_test.sh, with the standard library only (no NumPy):

  serve_client.py npy FILE ROWS SEED        write ROWS rows of fashion_mlp's x as float32 .npy
  serve_client.py same URL X.npy REF.npy    a request of X's rows answers REF's values (1e-6)
  serve_client.py load URL X.npy REF.npy    100 threads x 5 requests of 1 to 3 rows, all right
  serve_client.py drain URL X.npy REF.npy PID   threads sending, SIGTERM to PID while they do:
                                            every answer right, the signal's queued ones answered
  serve_client.py binary URL X.npy REF.npy  the binary data extension: a 2-row request with its
                                            input and output as raw bytes, a JSON request asking
                                            for a binary output, and a short binary body (400)
  serve_client.py idle URL X.npy REF.npy N  N connections left idle and 50 slow-loris clients
                                            (a header byte every 0.2 s) while 20 requests are
                                            answered right, each within 5 s
  serve_client.py soak URL X.npy REF.npy N  N requests from 32 threads (for a sanitizer soak)
  serve_client.py big URL BYTES             POST a body of BYTES bytes; print the status and body
Each prints one line per check, "ok   ..." or "FAIL ...", and exits 1 on a failure. The model is
fashion_mlp, or the name in the environment variable MODEL (a folder's model).
"""
import array
import ast
import json
import os
import random
import resource
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request

fails = 0
MODEL = os.environ.get("MODEL", "fashion_mlp")


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        fails += 1


def npy_read(path):
    """(shape, flat list of floats) of a little-endian float32 .npy."""
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:6] == b"\x93NUMPY", path
    hlen = int.from_bytes(raw[8:10], "little") if raw[6] == 1 else int.from_bytes(raw[8:12], "little")
    start = 10 + hlen if raw[6] == 1 else 12 + hlen
    header = ast.literal_eval(raw[start - hlen:start].decode("latin1"))
    assert header["descr"] == "<f4" and not header["fortran_order"], header
    a = array.array("f")
    a.frombytes(raw[start:])
    return list(header["shape"]), list(a)


def npy_write(path, shape, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
        "".join("%d, " % d for d in shape))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1"))
        f.write(array.array("f", values).tobytes())


def infer(url, rows, x, timeout=30):
    body = json.dumps({"id": "r%d" % rows, "inputs": [
        {"name": "x", "shape": [rows, 784], "datatype": "FP32", "data": x[:rows * 784]}]}).encode()
    req = urllib.request.Request(url + "/v2/models/" + MODEL + "/infer", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read())


def right(ans, rows, ref):
    """Why the answer is wrong, or None."""
    if ans.get("model_name") != MODEL or len(ans.get("outputs", [])) != 1:
        return "model_name or outputs: %s" % str(ans)[:200]
    o = ans["outputs"][0]
    if o["name"] != "logits" or o["datatype"] != "FP32" or o["shape"] != [rows, 10]:
        return "output %s %s %s" % (o["name"], o["datatype"], o["shape"])
    worst = max(abs(a - b) for a, b in zip(o["data"], ref[:rows * 10]))
    if len(o["data"]) != rows * 10 or worst > 1e-6:
        return "values differ from dpc run's by up to %g" % worst
    return None


def main():
    cmd = sys.argv[1]
    if cmd == "npy":
        rows, rng = int(sys.argv[3]), random.Random(int(sys.argv[4]))
        npy_write(sys.argv[2], [rows, 784], [rng.random() for _ in range(rows * 784)])
        return
    if cmd == "big":
        body = b" " * int(sys.argv[3])
        req = urllib.request.Request(sys.argv[2] + "/v2/models/fashion_mlp/infer", data=body,
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                print(r.status, r.read().decode())
        except urllib.error.HTTPError as e:
            print(e.code, e.read().decode())
        return
    url = sys.argv[2]
    _, x = npy_read(sys.argv[3])
    _, ref = npy_read(sys.argv[4])
    if cmd == "same":
        for rows in (1, 3):
            status, ans = infer(url, rows, x)
            why = right(ans, rows, ref)
            check(status == 200 and why is None and ans.get("id") == "r%d" % rows,
                  "a %d-row request answers dpc run's outputs within 1e-6%s" %
                  (rows, "" if why is None else ": " + why))
    elif cmd == "binary":
        path = url + "/v2/models/" + MODEL + "/infer"

        def post(header, raw, hlen=None):
            h = {"Content-Type": "application/octet-stream"}
            body = json.dumps(header).encode()
            h["Inference-Header-Content-Length"] = str(len(body) if hlen is None else hlen)
            req = urllib.request.Request(path, data=body + raw, method="POST", headers=h)
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    return r.status, r.headers, r.read()
            except urllib.error.HTTPError as e:
                return e.code, e.headers, e.read()

        raw = array.array("f", x[:2 * 784]).tobytes()
        status, headers, body = post({"inputs": [
            {"name": "x", "shape": [2, 784], "datatype": "FP32",
             "parameters": {"binary_data_size": len(raw)}}],
            "parameters": {"binary_data_output": True}}, raw)
        hl = int(headers.get("Inference-Header-Content-Length") or -1)
        ok = status == 200 and 0 < hl <= len(body)
        why = "status %d, header length %d" % (status, hl)
        if ok:
            ans = json.loads(body[:hl])
            o = ans["outputs"][0]
            out = array.array("f")
            out.frombytes(body[hl:])
            worst = max(abs(a - b) for a, b in zip(out, ref[:20]))
            ok = (o["parameters"]["binary_data_size"] == 80 and "data" not in o and len(out) == 20
                  and worst <= 1e-6)
            why = "%s, %d values, worst difference %g" % (str(o)[:120], len(out), worst)
        check(ok, "binary input and output: 2 rows as raw float32 answer dpc run's within 1e-6"
              + ("" if ok else ": " + why))
        req = urllib.request.Request(path, method="POST", data=json.dumps({"inputs": [
            {"name": "x", "shape": [1, 784], "datatype": "FP32", "data": x[:784]}],
            "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}).encode())
        with urllib.request.urlopen(req, timeout=30) as r:
            hl = int(r.headers.get("Inference-Header-Content-Length") or -1)
            body = r.read()
        out = array.array("f")
        out.frombytes(body[hl:] if hl > 0 else b"")
        check(hl > 0 and len(out) == 10 and max(abs(a - b) for a, b in zip(out, ref)) <= 1e-6,
              "a JSON request asking for its output as binary data gets raw float32")
        status, _, body = post({"inputs": [{"name": "x", "shape": [2, 784], "datatype": "FP32",
                                            "parameters": {"binary_data_size": len(raw)}}]},
                               raw[:-4])
        check(status == 400 and b"the binary data ends before input 'x'" in body,
              "a binary body shorter than its binary_data_size is refused: %d %s" %
              (status, body[:160].decode(errors="replace")))
        status, _, body = post({"inputs": []}, b"", hlen=10 ** 9)
        check(status == 400 and b"more than the body" in body,
              "an Inference-Header-Content-Length past the body is refused: %d %s" %
              (status, body[:160].decode(errors="replace")))
        status, _, body = post({"inputs": [{"name": "x", "shape": [1, 784], "datatype": "FP32",
                                            "data": x[:784]}], "outputs": [{"name": "probs"}]},
                               b"")
        check(status == 400 and b"unknown output 'probs': model 'fashion_mlp' gives 'logits'" in body,
              "an unknown output is refused: %d %s" % (status, body[:160].decode(errors="replace")))
    elif cmd == "idle":
        n = int(sys.argv[5])
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        host, port = url.split("//")[1].split(":")
        idle = []
        for _ in range(n):
            s = socket.create_connection((host, int(port)), timeout=10)
            idle.append(s)
        stop = threading.Event()

        def loris(k):
            s = socket.create_connection((host, int(port)), timeout=10)
            head = b"POST /v2/models/" + MODEL.encode() + b"/infer HTTP/1.1\r\nHost: x\r\n"
            i = 0
            try:
                while not stop.is_set():
                    s.send(head[i % len(head):i % len(head) + 1] if i < len(head) else b"X")
                    i += 1
                    time.sleep(0.2)
            except OSError:
                pass
            s.close()

        threads = [threading.Thread(target=loris, args=(k,)) for k in range(50)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        worst, wrong = 0.0, []
        for k in range(20):
            rows = 1 + k % 3
            t0 = time.monotonic()
            try:
                status, ans = infer(url, rows, x, timeout=5)
                why = right(ans, rows, ref) if status == 200 else "status %d" % status
            except Exception as e:  # noqa: BLE001 (every failure is reported)
                why = repr(e)
            worst = max(worst, time.monotonic() - t0)
            if why:
                wrong.append(why)
        stop.set()
        for t in threads:
            t.join(10)
        for s in idle:
            s.close()
        check(not wrong and worst < 5,
              "%d idle connections and 50 slow-loris clients open: 20 requests answered right, the "
              "slowest in %.3f s%s" % (n, worst, "" if not wrong else " (" + wrong[0] + ")"))
    elif cmd == "load":
        errors, done = [], [0]
        lock = threading.Lock()

        together = threading.Barrier(100)

        def client(k):
            rng = random.Random(k)
            together.wait(30)  # the first requests of all 100 at once
            for _ in range(5):
                rows = rng.randint(1, 3)
                try:
                    status, ans = infer(url, rows, x)
                    why = right(ans, rows, ref) if status == 200 else "status %d" % status
                except Exception as e:  # noqa: BLE001 (every failure is reported)
                    why = repr(e)
                with lock:
                    done[0] += 1
                    if why:
                        errors.append(why)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(100)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        check(done[0] == 500 and not errors,
              "100 threads at once x 5 requests: %d answered, %d wrong%s" %
              (done[0], len(errors), "" if not errors else " (" + errors[0] + ")"))
    elif cmd == "soak":
        # soak URL X REF N: N requests of 1 to 3 rows from 32 threads on kept-alive connections
        total, errors, done = int(sys.argv[5]), [], [0]
        lock = threading.Lock()
        t0 = time.monotonic()

        def soaker(k):
            import http.client
            rng = random.Random(k)
            host, port = url.split("//")[1].split(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
            for _ in range(total // 32):
                rows = rng.randint(1, 3)
                body = json.dumps({"inputs": [{"name": "x", "shape": [rows, 784],
                                               "datatype": "FP32", "data": x[:rows * 784]}]})
                try:
                    conn.request("POST", "/v2/models/%s/infer" % MODEL, body,
                                 {"Content-Type": "application/json"})
                    r = conn.getresponse()
                    ans = json.loads(r.read())
                    why = right(ans, rows, ref) if r.status == 200 else "status %d" % r.status
                except Exception as e:  # noqa: BLE001 (every failure is reported)
                    why = repr(e)
                    conn = http.client.HTTPConnection(host, int(port), timeout=60)
                with lock:
                    done[0] += 1
                    if why:
                        errors.append(why)

        threads = [threading.Thread(target=soaker, args=(k,)) for k in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(done[0] == total // 32 * 32 and not errors,
              "soak: %d requests answered in %.0f s, %d wrong%s" %
              (done[0], time.monotonic() - t0, len(errors),
               "" if not errors else " (" + errors[0] + ")"))
    elif cmd == "drain":
        pid = int(sys.argv[5])
        stop, lock = threading.Event(), threading.Lock()
        ok, wrong, refused, after = [0], [], [0], [0]
        sent_at = [0.0]

        def client(k):
            rng = random.Random(k)
            while not stop.is_set():
                rows = rng.randint(1, 3)
                try:
                    status, ans = infer(url, rows, x)
                    why = right(ans, rows, ref) if status == 200 else "status %d" % status
                    with lock:
                        if why:
                            wrong.append(why)
                        else:
                            ok[0] += 1
                            if sent_at[0] and time.monotonic() > sent_at[0]:
                                after[0] += 1
                except (urllib.error.URLError, ConnectionError) as e:
                    # refused at the socket (the listener closed, or never accepted from the
                    # backlog): not an accepted request; the client stops. Closing a listener
                    # resets the connections in its backlog, which a client still writing its
                    # body sees as a broken pipe and one waiting for its answer as a reset.
                    reason = getattr(e, "reason", e)
                    if isinstance(reason, (ConnectionRefusedError, ConnectionResetError,
                                           BrokenPipeError)) or \
                            "Remote end closed" in str(e):
                        with lock:
                            refused[0] += 1
                        return
                    with lock:
                        wrong.append(repr(e))
                    return
                except Exception as e:  # noqa: BLE001
                    with lock:
                        wrong.append(repr(e))
                    return

        threads = [threading.Thread(target=client, args=(k,)) for k in range(20)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        with lock:
            before = ok[0]
            sent_at[0] = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        time.sleep(2.0)
        stop.set()
        for t in threads:
            t.join(30)
        check(before > 0 and not wrong,
              "under load, SIGTERM: %d answered right before it, %d wrong%s" %
              (before, len(wrong), "" if not wrong else " (" + wrong[0] + ")"))
        check(after[0] > 0, "requests under way at SIGTERM answered after it (%d), %d clients "
              "refused at the socket" % (after[0], refused[0]))
    sys.exit(1 if fails else 0)


main()
