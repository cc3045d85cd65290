"""torch-conv: a PyTorch conv2d forward pass whose execution settings are kiln knobs.

    python3 conv.py [--iters N] [--batch B] [--channels C] [--size S]

The knobs arrive as environment variables (kiln sets KILN_KNOB_<NAME> for each knob of a
`knobs` benchmark); a `--knob NAME=VALUE` argument overrides one, e.g. from a `{dtype}`
substitution in the run command:

    KILN_KNOB_CUDNN_BENCHMARK  on | off     torch.backends.cudnn.benchmark (algorithm autotuning)
    KILN_KNOB_CHANNELS_LAST    on | off     NHWC memory format for input and weights
    KILN_KNOB_DTYPE            float32 | float16 | bfloat16
    KILN_KNOB_TF32             on | off     TF32 tensor cores for float32 convolutions

The convolution runs `--iters` times after a few warm-up iterations; then its output is
checked against a float64 CPU reference on a slice of the batch (tolerance by dtype), and the
script prints one line that does not depend on the knobs, so kiln's output check compares runs
of different settings. A wrong result exits with status 1.
"""

import argparse
import os
import sys

import torch

KNOBS = {
    "cudnn-benchmark": ("on", "off"),
    "channels-last": ("on", "off"),
    "dtype": ("float32", "float16", "bfloat16"),
    "tf32": ("on", "off"),
}
DEFAULTS = {"cudnn-benchmark": "off", "channels-last": "off", "dtype": "float32", "tf32": "off"}
# Relative error allowed against the float64 reference, per dtype (TF32 rounds like float16's
# mantissa, bfloat16 has 8 bits).
TOLERANCE = {"float32": 1e-4, "tf32": 5e-3, "float16": 5e-3, "bfloat16": 3e-2}


def knob_env_name(name):
    return "KILN_KNOB_" + "".join(c.upper() if c.isalnum() else "_" for c in name)


def knobs(overrides):
    chosen = {}
    for name, allowed in KNOBS.items():
        value = overrides.get(name, os.environ.get(knob_env_name(name), DEFAULTS[name]))
        if value not in allowed:
            sys.exit(f"knob {name}: '{value}' is not one of {', '.join(allowed)}")
        chosen[name] = value
    return chosen


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--channels", type=int, default=128)
    p.add_argument("--size", type=int, default=56)
    p.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE")
    args = p.parse_args()
    overrides = dict(k.split("=", 1) for k in args.knob)
    unknown = set(overrides) - set(KNOBS)
    if unknown:
        sys.exit(f"unknown knobs: {', '.join(sorted(unknown))}")
    k = knobs(overrides)
    if not torch.cuda.is_available():
        sys.exit("CUDA is not available to PyTorch")

    torch.backends.cudnn.benchmark = k["cudnn-benchmark"] == "on"
    torch.backends.cudnn.allow_tf32 = k["tf32"] == "on"
    torch.backends.cuda.matmul.allow_tf32 = k["tf32"] == "on"
    dtype = getattr(torch, k["dtype"])
    fmt = torch.channels_last if k["channels-last"] == "on" else torch.contiguous_format

    gen = torch.Generator().manual_seed(0)
    x_cpu = torch.randn(args.batch, args.channels, args.size, args.size, generator=gen)
    w_cpu = torch.randn(args.channels, args.channels, 3, 3, generator=gen) / (args.channels * 9) ** 0.5
    device = torch.device("cuda")
    x = x_cpu.to(device=device, dtype=dtype).contiguous(memory_format=fmt)
    conv = torch.nn.Conv2d(args.channels, args.channels, 3, padding=1, bias=False)
    conv = conv.to(device=device, dtype=dtype, memory_format=fmt)
    with torch.no_grad():
        conv.weight.copy_(w_cpu.to(device=device, dtype=dtype))
        for _ in range(3):
            y = conv(x)
        for _ in range(args.iters):
            y = conv(x)
        torch.cuda.synchronize()

    # Check a slice of the batch against float64 on the CPU.
    ref = torch.nn.functional.conv2d(x_cpu[:2].double(), w_cpu.double(), padding=1)
    got = y[:2].double().cpu()
    err = ((got - ref).norm() / ref.norm()).item()
    precision = "tf32" if k["dtype"] == "float32" and k["tf32"] == "on" else k["dtype"]
    if not err <= TOLERANCE[precision]:
        sys.exit(f"wrong result: relative error {err:.3g} exceeds {TOLERANCE[precision]} for {precision}")
    print(f"conv2d {args.batch}x{args.channels}x{args.size}x{args.size} k3 iters={args.iters} ok")


if __name__ == "__main__":
    main()
