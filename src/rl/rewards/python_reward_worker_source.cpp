#include "rl/rewards/python_reward_worker_source.h"

namespace rf::rl {

std::string_view python_reward_worker_source() {
  return R"PY(
# rlforge's reward worker (src/rl/rewards/python_reward_worker_source.h): imports a verl-style reward
# file and scores the samples it is sent, one at a time.
import asyncio
import importlib.util
import inspect
import json
import math
import os
import socket
import sys
import threading
import time
import traceback


def exit_with_trainer(trainer_pid):
    """Ends this worker within a second of the trainer's death, even in the middle of a hanging scorer."""
    while os.getppid() == trainer_pid:
        time.sleep(1)
    os._exit(1)


def describe(exc):
    """One line: how Python's traceback ends for `exc`, and where it was raised."""
    line = traceback.format_exception_only(type(exc), exc)[-1].strip()
    if isinstance(exc, SyntaxError):
        return line + f" (at {exc.filename}:{exc.lineno})"
    # The innermost frame of real source: not importlib's frozen modules, nor this worker (`-c`).
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
    if frames:
        line += f" (at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name})"
    return line


def load(path, name):
    """The scoring function, or the error naming the config key to fix."""
    # verl's get_custom_reward_fn: import the file by path as `custom_module`.
    spec = importlib.util.spec_from_file_location("custom_module", path)
    if spec is None:
        return None, {"key": "path", "error": "not a Python source file (expected a .py file)"}
    module = importlib.util.module_from_spec(spec)
    sys.modules["custom_module"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # SystemExit at import time is a broken file too
        return None, {"key": "path", "error": "importing it raised " + describe(exc)}
    fn = getattr(module, name, None)
    if callable(fn):
        return fn, None
    functions = sorted(n for n, v in vars(module).items()
                       if callable(v) and getattr(v, "__module__", None) == "custom_module")
    what = f"defines no '{name}'" if fn is None else f"defines '{name}' as a {type(fn).__name__}, not a function"
    return None, {"key": "name", "error": f"the file {what} (its functions: {', '.join(functions) or 'none'})"}


def as_number(value):
    """`value` as a finite float, or None: anything float() takes except text (verl casts with float())."""
    if isinstance(value, (str, bytes, bytearray)):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def to_answer(result):
    if isinstance(result, dict):
        if "score" not in result:
            return {"error": f"returned a dict without 'score' (keys: {', '.join(map(str, result)) or 'none'})"}
        score = as_number(result["score"])
        what = f"a dict whose 'score' is {result['score']!r:.80} ({type(result['score']).__name__})"
        # Extra values that are not numbers (verl's `pred` strings, ...) are dropped: rlforge logs numbers only.
        extra = {k: as_number(v) for k, v in result.items() if k != "score" and isinstance(k, str)}
        extra = {k: v for k, v in extra.items() if v is not None}
    else:
        score, what, extra = as_number(result), f"{result!r:.80} ({type(result).__name__})", {}
    if score is None:
        return {"error": f"returned {what}; expected a finite number or a dict with a finite numeric 'score'"}
    return {"score": score, "extra": extra}


def call(fn, request, reward_kwargs):
    kwargs = {key: request[key] for key in ("data_source", "solution_str", "ground_truth", "extra_info")}
    kwargs.update(reward_kwargs)  # verl: reward_kwargs take precedence over the call's own
    try:
        result = fn(**kwargs)
        if inspect.iscoroutine(result):  # verl's reward loop awaits async scorers
            result = asyncio.run(result)
    except BaseException as exc:
        # The traceback without this frame: it starts at the user's function.
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next)
        return {"error": "raised " + describe(exc), "traceback": "".join(lines).rstrip("\n")}
    return to_answer(result)


def main():
    threading.Thread(target=exit_with_trainer, args=(os.getppid(),), daemon=True).start()
    channel = socket.socket(fileno=3)
    os.set_inheritable(3, False)  # the scorer's own subprocesses must not hold our end open
    reader = channel.makefile("rb")

    def send(message):
        channel.sendall(json.dumps(message).encode() + b"\n")

    config = json.loads(reader.readline())
    fn, error = load(config["path"], config["function_name"])
    if error:
        send({"ready": False, **error})
        return
    send({"ready": True})
    for line in reader:
        request = json.loads(line)
        send({"id": request["id"], **call(fn, request, config["reward_kwargs"])})


try:
    main()
except (BrokenPipeError, ConnectionResetError):
    pass  # the trainer went away: nothing is waiting for an answer
)PY";
}

}  // namespace rf::rl
