"""The line a user can act on, on a GPU: a transformers generate() server.

    python3 tests/gpu/check_user_line.py --build build [--out DIR]

Runs this file's serve() under the tracer (`cumemtrace run`, which builds
PyTorch's tracker for this Python when none is cached): a tiny GPT-2 built
from GPT2Config (no weights downloaded: n_layer=2, n_embd=64) answers 40
requests of random lengths with generate(), and the server keeps each
request's past_key_values (the leak). transformers' own files are in
site-packages, so its frames are a library's: the growing site must be the
user's call to generate() (SERVE-LINE, in serve), with transformers named
beside it ("(via transformers, torch: GenerationMixin.generate ->
DynamicLayer.update:N)", PyTorch's Module call folded into it) and nothing
after that part, and no finding may be sited in site-packages. Prints PASS or FAIL per check, then the findings block;
exits 1 on any FAIL. Needs torch with CUDA and transformers (5.x).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

failures = 0


def check(ok, what):
    global failures
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    failures += 0 if ok else 1


KEPT = []   # a module global, as a server's store of sessions is: held to the end


def serve():
    """The traced program: the server, keeping every request's cache."""
    import random
    import time

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=1000, n_positions=512)
    model = GPT2LMHeadModel(config).cuda().eval()
    random.seed(0)
    kept = KEPT
    with torch.no_grad():
        for _ in range(40):
            length = random.randint(8, 96)
            prompt = torch.randint(0, config.vocab_size, (1, length), device="cuda")
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=24,  # SERVE-LINE
                                 do_sample=False, pad_token_id=0, use_cache=True,
                                 return_dict_in_generate=True)
            kept.append(out.past_key_values)
            time.sleep(0.05)
    torch.cuda.synchronize()
    print(f"served 40 requests, keeping {len(kept)} caches", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--out", default=None)
    parser.add_argument("--serve", action="store_true", help="be the traced program")
    args = parser.parse_args()
    if args.serve:
        serve()
        return 0
    build = os.path.abspath(args.build)
    out = os.path.abspath(args.out or tempfile.mkdtemp(prefix="cumemtrace-user-line-"))
    os.makedirs(out, exist_ok=True)
    script = os.path.abspath(__file__)
    with open(script) as handle:
        line = next(n for n, text in enumerate(handle, 1) if "# SERVE-LINE" in text and "model" in text)
    env = dict(os.environ, CUMEMTRACE_OUTPUT=os.path.join(out, "serve"),
               CUMEMTRACE_FORMAT="text,json", CUMEMTRACE_SAMPLE_MS="100")
    done = subprocess.run([os.path.join(build, "cumemtrace"), "run", "--", sys.executable, script,
                           "--serve"], env=env, capture_output=True, text=True)
    with open(os.path.join(out, "serve.stderr"), "w") as handle:
        handle.write(done.stderr)
    report = None
    if os.path.exists(os.path.join(out, "serve.json")):
        with open(os.path.join(out, "serve.json")) as handle:
            report = json.load(handle)
    check(done.returncode == 0 and "served 40 requests" in done.stdout and report is not None,
          f"the server ran under the tracer (rc {done.returncode}) and wrote serve.json "
          f"{done.stderr[-500:] if done.returncode else ''}")
    findings = (report or {}).get("findings") or []
    site = f"{script}:{line} in serve"
    growing = [f["site"] or "" for f in findings if f["verdict"] == "growing"]
    check(any(s.startswith(site) for s in growing),
          f"a growing site is the user's call to generate(), {site}: {growing}")
    via = re.compile(re.escape(site) + r" \(via transformers(, [\w.]+)*: [^()]*generate -> "
                     r"[^()]*:\d+\)$")
    check(any(via.match(s) for s in growing),
          f"with transformers named beside it, nothing after: {growing}")
    check(not any("_call_impl" in s for s in growing),
          f"no PyTorch frame of the path named apart: {growing}")
    sited = [f["site"] for f in findings if f.get("site")]
    check(not any("site-packages" in s.split(" in ")[0] or "dist-packages" in s.split(" in ")[0]
                  for s in sited),
          f"no finding is sited in an installed package: {sited}")
    lines = done.stderr.splitlines()
    start = next((i for i, l in enumerate(lines) if l.strip() == "Findings:"), None)
    block = []
    for l in lines[start + 1:] if start is not None else []:
        if not l.strip():
            break
        block.append(l)
    check(any(l.startswith(f"   - growing at {site}") for l in block),
          "the findings block on stderr names it")
    check(len(set(block)) == len(block), "no two lines of the findings block read the same")
    print("findings block:\n" + "\n".join(block))
    print(f"files: {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
