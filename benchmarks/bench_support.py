"""accel's benchmark method (benchmarks/README.md) for the Python harnesses that put accel's compiled ops
beside torch and DeepSpeed in one process: the machine's name as lscpu gives it, interleaved rounds,
median and min-max, and the JSON file scripts/plots.sh reads (format "accel-bench/1", the same as
benchmarks/bench_support.hpp writes).
"""
import datetime
import json
import os
import subprocess
import sys
import time

AMD_CORES = {23: "Zen/Zen+ or Zen 2", 26: "Zen 5"}


def exit_on_help(doc, args):
    """-h / --help prints the harness's docstring and exits, before anything is measured."""
    if "-h" in args or "--help" in args:
        print(doc.strip())
        sys.exit(0)


def _amd_core(family, model):
    if family == 25:
        return "Zen 4" if (0x10 <= model <= 0x1F or 0x60 <= model <= 0xAF) else "Zen 3"
    if family == 23:
        return "Zen 2" if model >= 0x30 else "Zen/Zen+"
    return AMD_CORES.get(family, "")


def cpu_name():
    """'AMD EPYC (family 25, model 17: Zen 4; 2 CPUs)': lscpu's Model name, CPU family and Model."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" in line:
                    k, v = line.split(":", 1)
                    info.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    family, model = int(info.get("cpu family", -1)), int(info.get("model", -1))
    core = _amd_core(family, model) if info.get("vendor_id") == "AuthenticAMD" else ""
    return f"{info.get('model name', 'unknown CPU')} (family {family}, model {model}" + \
        (f": {core}" if core else "") + f"; {os.cpu_count()} CPUs)"


def load_average():
    try:
        return os.getloadavg()[0]
    except OSError:
        return -1.0


def run_checked(cmd, env=None):
    """subprocess.run with the output captured; on failure, the program's own message (a missing corpus,
    an unknown option) and the command, then exit — not a Python traceback that hides both."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        sys.exit(f"{' '.join(cmd)}: exited with status {proc.returncode}")
    return proc


def summarize(values):
    """{'median', 'min', 'max', 'n'} of a list of numbers."""
    v = sorted(values)
    n = len(v)
    if n == 0:
        return {"median": 0.0, "min": 0.0, "max": 0.0, "n": 0}
    med = v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
    return {"median": med, "min": v[0], "max": v[-1], "n": n}


def ratio_per_round(a, b):
    """a[i] / b[i] round by round, summarized."""
    return summarize([x / y for x, y in zip(a, b) if y])


def fmt(s, digits=2):
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}-{s['max']:.{digits}f})"


def interleaved_rounds(candidates, rounds, clock=time.perf_counter):
    """candidates: {name: callable doing one unit}. Warms each up once, then runs `rounds` rounds, each
    timing one call of every candidate, the order rotated by one each round. Returns {name: [seconds]}."""
    names = list(candidates)
    for n in names:
        candidates[n]()
    out = {n: [] for n in names}
    for r in range(rounds):
        for j in range(len(names)):
            n = names[(r + j) % len(names)]
            t0 = clock()
            candidates[n]()
            out[n].append(clock() - t0)
    return out


class Report:
    """Points and ratios of one benchmark family, written as JSON to --json=FILE or
    $ACCEL_BENCH_JSON_DIR/<family>.json."""

    def __init__(self, family, argv=None, device=""):
        argv = sys.argv if argv is None else argv
        self.family, self.device, self.rounds = family, device, 0
        self.command = " ".join(["python3"] + argv)
        self.path = next((a[7:] for a in argv if a.startswith("--json=")), "")
        if not self.path and os.environ.get("ACCEL_BENCH_JSON_DIR"):
            self.path = os.path.join(os.environ["ACCEL_BENCH_JSON_DIR"], family + ".json")
        self.load_start = load_average()
        self.points, self.ratios, self.notes = [], [], {}

    def header(self):
        dev = f", {self.device}" if self.device else ""
        return (f"{self.family} on {cpu_name()}{dev}; load average {self.load_start:.2f}; "
                f"{datetime.datetime.utcnow():%Y-%m-%d}\ncommand: {self.command}")

    def point(self, series, group, x, metric, s):
        self.points.append(dict(series=series, group=group, x=x, metric=metric, **s))

    def ratio(self, name, baseline, group, x, s):
        self.ratios.append(dict(name=name, baseline=baseline, group=group, x=x, **s))

    def write(self):
        if not self.path:
            return
        doc = {"format": "accel-bench/1", "family": self.family, "command": self.command, "cpu": cpu_name(),
               "device": self.device or cpu_name(), "date": f"{datetime.datetime.utcnow():%Y-%m-%d}",
               "load_start": self.load_start, "load_end": load_average(), "rounds": self.rounds,
               "notes": self.notes, "points": self.points, "ratios": self.ratios}
        with open(self.path, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"wrote {self.path}")
