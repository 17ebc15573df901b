#!/usr/bin/env python3
"""specwright serve against real clients, on loopback only.

1. The official `openai` package: completions and chat, streamed and not;
   greedy text equal to `specwright run` on the same engine and prompt.
2. curl: the raw SSE framing and the error codes.
3. /metrics against what the clients saw (no disconnects: exact sums).
4. Scale-out: N servers behind nginx (upstreams on loopback ports); a bounded
   load of mixed streamed / non-streamed requests from concurrent clients,
   some leaving early; one server is killed mid-load. Every request must end
   in a complete answer or a clear HTTP error, nothing may hang, and only the
   requests in flight on the killed server may fail.
5. SIGTERM: a queued request gets 503, the running one finishes, exit 0.

Prints p50/p99 time to first token and tokens/s; exits 1 on any failure.
Usage: clients.py --specwright BIN --engine DIR [--model GGUF] [--requests 40] [--clients 4] [--servers 2]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import openai

FAILS = []
MODEL_ARGS = []  # --model GGUF for serve and run, when not the engine's own path


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what, flush=True)
    return cond


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def get(url, timeout=10):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def start_server(sw, engine, port, log):
    p = subprocess.Popen([sw, "serve", engine, "--port", str(port), "--queue", "64"] + MODEL_ARGS,
                         stdout=log, stderr=log)
    t0 = time.time()
    while time.time() - t0 < 300:
        if p.poll() is not None:
            raise SystemExit(f"serve on port {port} exited with {p.returncode}")
        try:
            code, _ = get(f"http://127.0.0.1:{port}/health", timeout=2)
            if code == 200:
                return p
        except OSError:
            pass
        time.sleep(0.2)
    p.kill()
    raise SystemExit(f"serve on port {port}: not ready after 300 s")


def metrics(port):
    _, text = get(f"http://127.0.0.1:{port}/metrics")
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def run_cli(sw, engine, prompt, n, chat, extra=()):
    args = [sw, "run", engine, "-p", prompt, "-n", str(n), "--backend", "host"] + MODEL_ARGS + list(extra)
    args.append("--chat" if chat else "--no-chat")
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    check(r.returncode == 0, f"specwright run exited {r.returncode}: {r.stderr[-500:]}")
    text = r.stdout
    if text.endswith("\n"):
        text = text[:-1]  # run ends its text with a newline
    return text.replace("<|im_end|>", "").replace("<|endoftext|>", "")


def part_clients(sw, engine, port, model):
    base = f"http://127.0.0.1:{port}/v1"
    cl = openai.OpenAI(base_url=base, api_key="none", max_retries=0, timeout=300)
    prompt = "The three primary colors are"
    n = 12
    c = cl.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0)
    ref = ref_completion = run_cli(sw, engine, prompt, n, chat=False)
    check(c.choices[0].text == ref, f"completion {c.choices[0].text!r} != specwright run {ref!r}")
    check(c.usage.completion_tokens <= n and c.usage.prompt_tokens > 0, f"usage {c.usage}")
    streamed = "".join(ch.choices[0].text for ch in
                       cl.completions.create(model=model, prompt=prompt, max_tokens=n, stream=True)
                       if ch.choices)
    check(streamed == ref, f"streamed completion {streamed!r} != {ref!r}")

    msg = "Name a fruit."
    cc = cl.chat.completions.create(model=model, messages=[{"role": "user", "content": msg}], max_tokens=n)
    ref = run_cli(sw, engine, msg, n, chat=True)
    check(cc.choices[0].message.content == ref, f"chat {cc.choices[0].message.content!r} != run {ref!r}")
    parts, usage = [], None
    for ch in cl.chat.completions.create(model=model, messages=[{"role": "user", "content": msg}],
                                          max_tokens=n, stream=True, stream_options={"include_usage": True}):
        if ch.choices and ch.choices[0].delta.content:
            parts.append(ch.choices[0].delta.content)
        if ch.usage:
            usage = ch.usage
    check("".join(parts) == ref, f"streamed chat {''.join(parts)!r} != {ref!r}")
    check(usage is not None and usage.completion_tokens == cc.usage.completion_tokens, f"stream usage {usage}")
    models = cl.models.list()
    check([m.id for m in models.data] == [model], f"models {models}")
    try:
        cl.completions.create(model=model, prompt="x", max_tokens=2, n=2)
        check(False, "n=2 was accepted")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and "n" == (e.body or {}).get("param"), f"n=2 error {e}")
    try:
        cl.completions.create(model="other", prompt="x", max_tokens=2)
        check(False, "an unknown model was accepted")
    except openai.NotFoundError:
        pass
    # a greedy engine cannot honour a temperature: refused, naming it; at
    # temperature 0 top_p / top_k are accepted and cannot change the text
    try:
        cl.completions.create(model=model, prompt=prompt, max_tokens=2, temperature=0.7)
        check(False, "temperature 0.7 was accepted by a greedy engine")
    except openai.BadRequestError as e:
        body = e.body or {}
        check(body.get("param") == "temperature" and "greedily" in body.get("message", ""),
              f"temperature 0.7 error {e}")
    c = cl.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0, top_p=0.5,
                              extra_body={"top_k": 3})
    check(c.choices[0].text == ref_completion, f"greedy with top_p/top_k {c.choices[0].text!r} != {ref_completion!r}")
    print("openai client: completions, chat, streaming, usage, models, errors: ok", flush=True)


def part_sampling(sw, engine, greedy_engine, port, model):
    """Per-request sampling on a sampled (one-hot) engine, one server, one
    captured graph: greedy requests equal the greedy engine's text; a seeded
    sampled request equals `specwright run` with the same values and seed,
    repeats with the same seed, differs with another; greedy again after it."""
    cl = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=300)
    prompt, n = "The three primary colors are", 12
    greedy_ref = run_cli(sw, greedy_engine, prompt, n, chat=False)

    def complete(**kw):
        return cl.completions.create(model=model, prompt=prompt, max_tokens=n, **kw).choices[0].text

    g1 = complete(temperature=0)
    check(g1 == greedy_ref, f"greedy on the sampled engine {g1!r} != greedy engine {greedy_ref!r}")
    hot = dict(temperature=0.9, top_p=0.95, extra_body={"top_k": 40})
    s7 = complete(seed=7, **hot)
    ref7 = run_cli(sw, engine, prompt, n, chat=False,
                   extra=["-t", "0.9", "--top-p", "0.95", "--top-k", "40", "--seed", "7"])
    check(s7 == ref7, f"seed 7 at T 0.9: served {s7!r} != specwright run {ref7!r}")
    check(complete(seed=7, **hot) == s7, "the same seed gave another text")
    s8 = complete(seed=8, **hot)
    check(s8 != s7, f"seeds 7 and 8 gave the same text {s8!r}")
    g2 = complete(temperature=0)
    check(g2 == greedy_ref, f"greedy after sampled requests {g2!r} != {greedy_ref!r}")
    streamed = "".join(ch.choices[0].text for ch in
                       cl.completions.create(model=model, prompt=prompt, max_tokens=n, seed=7, stream=True, **hot)
                       if ch.choices)
    check(streamed == s7, f"streamed seed 7 {streamed!r} != {s7!r}")
    print("sampling per request (one-hot engine): greedy == greedy engine, seeded == specwright run: ok",
          flush=True)


def curl(*args):
    return subprocess.run(["curl", "-s", "--max-time", "300", *args], capture_output=True, text=True)


def part_curl(port, model):
    url = f"http://127.0.0.1:{port}"
    r = curl("-N", f"{url}/v1/completions", "-H", "Content-Type: application/json",
             "-d", json.dumps({"model": model, "prompt": "Once", "max_tokens": 5, "stream": True}))
    events = r.stdout.split("\n\n")
    check(events[-1] == "" and events[-2] == "data: [DONE]", f"SSE ending {events[-3:]}")
    for ev in events[:-2]:
        check(ev.startswith("data: ") and "\n" not in ev, f"SSE event framing {ev!r}")
        json.loads(ev[6:])
    for body, want in [("{bad", 400), (json.dumps({"model": "x", "prompt": "a"}), 404),
                       (json.dumps({"prompt": "a", "max_tokens": 10 ** 7}), 400),
                       (json.dumps({"prompt": "a", "logit_bias": {"1": 5}}), 400)]:
        r = curl("-o", "/dev/null", "-w", "%{http_code}", f"{url}/v1/completions",
                 "-H", "Content-Type: application/json", "-d", body)
        check(r.stdout == str(want), f"curl {body[:40]} -> {r.stdout}, expected {want}")
    big = json.dumps({"prompt": "a" * (2 << 20)})
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"{url}/v1/completions",
                        "-H", "Content-Type: application/json", "--data-binary", "@-"], input=big,
                       capture_output=True, text=True)
    check(r.stdout == "413", f"2 MB body -> {r.stdout}, expected 413")
    r = curl("-o", "/dev/null", "-w", "%{http_code}", f"{url}/v1/chat/completions")
    check(r.stdout == "405", f"GET chat -> {r.stdout}, expected 405")
    print("curl: SSE framing and error codes: ok", flush=True)


def part_metrics(port, model):
    before = metrics(port)
    cl = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=300)
    seen = 0
    for i in range(4):
        c = cl.completions.create(model=model, prompt=f"Count: {i}, {i + 1},", max_tokens=6)
        seen += c.usage.completion_tokens
    after = metrics(port)
    lbl = f'{{model_name="{model}"}}'
    d = after[f"vllm:generation_tokens_total{lbl}"] - before.get(f"vllm:generation_tokens_total{lbl}", 0)
    check(d == seen, f"/metrics generation tokens +{d}, clients saw {seen}")
    k = 'specwright_http_requests_total{endpoint="/v1/completions",code="200"}'
    check(after.get(k, 0) - before.get(k, 0) == 4, "/metrics 200 count")
    print(f"/metrics: +{int(d)} generated tokens = what the clients saw: ok", flush=True)


NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
error_log {tmp}/nginx-error.log warn;
pid {tmp}/nginx.pid;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    upstream specwright {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 1m;
        location / {{
            proxy_pass http://specwright;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 600s;
            proxy_next_upstream error timeout http_502 http_503 non_idempotent;
            proxy_next_upstream_tries 2;
            add_header X-Upstream $upstream_addr always;
        }}
    }}
}}
"""


def one_request(port, model, i, results):
    stream = i % 2 == 1
    leave = i % 5 == 4  # some clients disconnect early
    body = {"model": model, "prompt": f"Item {i}: the", "max_tokens": 8, "stream": stream}
    rec = {"i": i, "stream": stream, "leave": leave, "status": None, "tokens": 0, "ttft": None,
           "t": None, "error": None}
    t0 = time.time()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=600)
        data = json.dumps(body).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Connection: close\r\nContent-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            k = s.recv(65536)
            if not k:
                break
            buf += k
        head, _, rest = buf.partition(b"\r\n\r\n")
        rec["status"] = int(head.split()[1]) if head else None
        if leave:
            s.close()
            rec["t"] = time.time() - t0
            results.append(rec)
            return
        while True:
            if stream and rec["ttft"] is None and b"data: {" in rest:
                rec["ttft"] = time.time() - t0
            k = s.recv(65536)
            if not k:
                break
            rest += k
        s.close()
        rec["t"] = time.time() - t0
        text = rest.decode(errors="replace")
        if "chunked" in head.decode().lower():  # de-chunk
            out, p = [], text
            while p:
                ln, _, p = p.partition("\r\n")
                n = int(ln.split(";")[0] or "0", 16)
                if n == 0:
                    break
                out.append(p[:n])
                p = p[n + 2:]
            text = "".join(out)
        if rec["status"] == 200:
            if stream:
                ok = text.rstrip().endswith("data: [DONE]")
                usage = None
                for ev in text.split("\n\n"):
                    if ev.startswith("data: {"):
                        j = json.loads(ev[6:])
                        if j.get("choices") and j["choices"][0].get("finish_reason"):
                            usage = True
                rec["error"] = None if ok and usage else "incomplete stream"
                rec["tokens"] = text.count('"text":') - 1
            else:
                j = json.loads(text)
                rec["tokens"] = j["usage"]["completion_tokens"]
                rec["ttft"] = rec["t"]
        else:
            try:
                rec["error"] = json.loads(text)["error"]["message"] if text.strip().startswith("{") else text[:80]
            except ValueError:
                rec["error"] = text[:80]
    except OSError as e:
        rec["error"] = f"socket: {e}"
        rec["t"] = time.time() - t0
    results.append(rec)


def part_load(sw, engine, tmp, n_req, n_clients, n_servers, model):
    ports = [free_port() for _ in range(n_servers)]
    logs = [open(os.path.join(tmp, f"serve{k}.log"), "w") for k in range(n_servers)]
    procs = [start_server(sw, engine, p, logs[k]) for k, p in enumerate(ports)]
    nport = free_port()
    for d in ["body", "proxy", "fcgi", "uwsgi", "scgi"]:
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(tmp=tmp, port=nport,
                                  servers="\n".join(f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=30s;"
                                                    for p in ports)))
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"  # /usr/sbin may be off a user's PATH
    ng = subprocess.Popen([nginx, "-p", tmp, "-c", conf], stderr=subprocess.PIPE)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", nport), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    results, lock = [], threading.Lock()
    queue = list(range(n_req))
    killed = {"at": None}

    def client():
        while True:
            with lock:
                if not queue:
                    return
                i = queue.pop(0)
                if killed["at"] is None and i >= n_req // 3:
                    procs[-1].kill()  # one server dies mid-load (SIGKILL: no goodbye)
                    killed["at"] = time.time()
            one_request(nport, model, i, results)

    t0 = time.time()
    ths = [threading.Thread(target=client) for _ in range(n_clients)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(timeout=900)
    wall = time.time() - t0
    check(not any(t.is_alive() for t in ths), "a load client hung")
    ng.send_signal(signal.SIGQUIT)
    ng.wait(timeout=30)
    procs[-1].wait()
    ok = [r for r in results if r["status"] == 200 and not r["error"] and not r["leave"]]
    failed = [r for r in results if not r["leave"] and (r["status"] != 200 or r["error"])]
    check(len(results) == n_req, f"{len(results)} of {n_req} requests came back")
    # only requests in flight on the killed server at the moment it died may fail
    check(len(failed) <= n_clients, f"{len(failed)} requests failed (at most {n_clients} were in flight): "
          + "; ".join(f"#{r['i']} {r['status']} {r['error']}" for r in failed[:6]))
    for r in failed:
        check(r["status"] in (None, 502, 503, 504) or r["error"], f"request {r['i']}: unclear failure {r}")
    ttft = sorted(r["ttft"] for r in ok if r["ttft"] is not None)
    toks = sum(r["tokens"] for r in ok)
    p = lambda q: ttft[min(len(ttft) - 1, int(q * len(ttft)))] if ttft else float("nan")
    print(f"load: {n_req} requests, {n_clients} clients, {n_servers} servers behind nginx, one killed after "
          f"{n_req // 3} requests: {len(ok)} complete, {sum(r['leave'] for r in results)} left early, "
          f"{len(failed)} failed (in flight on the killed server); TTFT p50 {p(0.5):.2f} s p99 {p(0.99):.2f} s; "
          f"{toks} tokens in {wall:.1f} s = {toks / wall:.2f} tok/s overall", flush=True)
    # the survivor ends idle: requests whose clients left are ended or never
    # started, so it drains within the time a few short generations take
    lbl = f'{{model_name="{model}"}}'
    idle = False
    for _ in range(1200):
        m = metrics(ports[0])
        if m.get(f"vllm:num_requests_running{lbl}") == 0 and m.get(f"vllm:num_requests_waiting{lbl}") == 0:
            idle = True
            break
        time.sleep(0.1)
    check(idle, "the surviving server is not idle 120 s after the load")
    for k, p_ in enumerate(procs[:-1]):
        p_.send_signal(signal.SIGTERM)
        check(p_.wait(timeout=120) == 0, f"server {k} did not exit 0 on SIGTERM")
    for f in logs:
        f.close()


def part_sigterm(sw, engine, tmp, model):
    port = free_port()
    log = open(os.path.join(tmp, "sigterm.log"), "w")
    p = start_server(sw, engine, port, log)
    res = {}

    def req(name, n):
        try:
            r = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                       data=json.dumps({"prompt": "Tell me a story.", "max_tokens": n}).encode(),
                                       headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(r, timeout=600) as resp:
                res[name] = (resp.status, json.loads(resp.read()))
        except urllib.error.HTTPError as e:
            res[name] = (e.code, json.loads(e.read()))

    # one long request runs; three wait behind it; SIGTERM while at least two
    # still wait (a fast engine may have started the first of them already)
    a = threading.Thread(target=req, args=("running", 300))
    a.start()
    for _ in range(600):
        if metrics(port).get(f'vllm:num_requests_running{{model_name="{model}"}}') == 1:
            break
        time.sleep(0.02)
    qs = [threading.Thread(target=req, args=(f"queued{k}", 4)) for k in range(3)]
    for t in qs:
        t.start()
    for _ in range(600):
        if metrics(port).get(f'vllm:num_requests_waiting{{model_name="{model}"}}', 0) >= 2:
            break
        time.sleep(0.02)
    p.send_signal(signal.SIGTERM)
    a.join(600)
    for t in qs:
        t.join(600)
    rc = p.wait(timeout=120)
    log.close()
    check(rc == 0, f"SIGTERM exit code {rc}")
    check(res.get("running", (0,))[0] == 200, f"running request after SIGTERM: {res.get('running')}")
    codes = [res.get(f"queued{k}", (0,))[0] for k in range(3)]
    check(all(c in (200, 503) for c in codes) and codes.count(503) >= 1,
          f"queued requests after SIGTERM: {codes} (each 200 or 503, at least one 503)")
    for k in range(3):
        r = res.get(f"queued{k}")
        if r and r[0] == 503:
            check(r[1].get("error", {}).get("code") == "shutting_down", f"503 body {r[1]}")
    print("SIGTERM: running request finished (200), queued answered 503, exit 0: ok", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--specwright", required=True)
    ap.add_argument("--engine", required=True)
    ap.add_argument("--sampled-engine", help="the same engine built with a sampled verification method")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--model", help="the target's weights, when not the path the engine was built with")
    a = ap.parse_args()
    if a.model:
        MODEL_ARGS.extend(["--model", os.path.abspath(a.model)])
    sw, engine = os.path.abspath(a.specwright), os.path.abspath(a.engine)
    tmp = tempfile.mkdtemp(prefix="sw-serve-")
    try:
        port = free_port()
        log = open(os.path.join(tmp, "serve.log"), "w")
        p = start_server(sw, engine, port, log)
        model = json.loads(get(f"http://127.0.0.1:{port}/v1/models")[1])["data"][0]["id"]
        try:
            part_clients(sw, engine, port, model)
            part_curl(port, model)
            part_metrics(port, model)
        finally:
            p.send_signal(signal.SIGTERM)
            check(p.wait(timeout=120) == 0, "server did not exit 0 on SIGTERM")
            log.close()
        if a.sampled_engine:
            port = free_port()
            log = open(os.path.join(tmp, "serve-sampled.log"), "w")
            p = start_server(sw, os.path.abspath(a.sampled_engine), port, log)
            try:
                part_sampling(sw, os.path.abspath(a.sampled_engine), engine, port, model)
            finally:
                p.send_signal(signal.SIGTERM)
                check(p.wait(timeout=120) == 0, "sampled server did not exit 0 on SIGTERM")
                log.close()
        part_load(sw, engine, tmp, a.requests, a.clients, a.servers, model)
        part_sigterm(sw, engine, tmp, model)
    finally:
        if FAILS:
            for name in sorted(os.listdir(tmp)):
                if name.endswith(".log"):
                    with open(os.path.join(tmp, name)) as f:
                        print(f"---- {name} (tail)\n" + "".join(f.readlines()[-15:]))
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'FAILED' if FAILS else 'PASSED'}: {len(FAILS)} failures")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
