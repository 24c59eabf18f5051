#!/usr/bin/python3
"""torch.fx side of bench/partition_vs_fx: builds the same synthetic graph as
bench/partition_bench.cc (make_graph, unsupported_set) with torch.fx and times
CapabilityBasedPartitioner (its constructor, which builds the per-node ancestor sets, and
propose_partitions). Prints one line:
  fx_result init_s=<s> propose_s=<s> partitions=<n>
Usage: /usr/bin/python3 bench/partition_fx.py SHAPE NODES   (SHAPE: chain, diamond, fanout)
"""
import sys
import time

import torch
import torch.fx as fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

FAN_WIDTH = 64
MASK64 = (1 << 64) - 1


def make_graph(shape, n):
    """List of (is_add, a, b) with input indices; -1 is the placeholder x."""
    ops = []
    prev = -1
    for i in range(n):
        op = (False, -1, -1)
        if shape == "chain":
            op = (False, i - 1, -1)
        elif shape == "diamond":
            k = i % 4
            if k == 0:
                op = (False, prev, -1)
            elif k == 1:
                op = (False, i - 1, -1)
            elif k == 2:
                op = (False, i - 2, -1)
            else:
                op = (True, i - 2, i - 1)
                prev = i
        else:
            j = i % (2 * FAN_WIDTH)
            root = i - j
            if j == 0:
                op = (False, prev, -1)
            elif j <= FAN_WIDTH:
                op = (False, root, -1)
            elif j == FAN_WIDTH + 1:
                op = (True, root + 1, root + 2)
            else:
                op = (True, i - 1, root + (j - FAN_WIDTH) + 1)
            if j >= FAN_WIDTH + 1:
                prev = i
        ops.append(op)
    return ops


def unsupported_set(n):
    out = []
    state = 12345
    for _ in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) & MASK64
        out.append(((state >> 33) % 10) == 0)
    return out


class IndexSupport(OperatorSupportBase):
    """Supports every call_function node whose name is not in `unsupported`."""

    def __init__(self, unsupported):
        self.unsupported = unsupported

    def is_node_supported(self, submodules, node):
        return node.op == "call_function" and node.name not in self.unsupported


def main():
    shape, n = sys.argv[1], int(sys.argv[2])
    ops = make_graph(shape, n)
    unsup = unsupported_set(n)
    graph = fx.Graph()
    x = graph.placeholder("x")
    nodes = []
    for i, (is_add, a, b) in enumerate(ops):
        ia = x if a < 0 else nodes[a]
        if is_add:
            ib = x if b < 0 else nodes[b]
            node = graph.create_node("call_function", torch.add, (ia, ib), name=f"n{i}")
        else:
            node = graph.create_node("call_function", torch.relu, (ia,), name=f"n{i}")
        nodes.append(node)
    graph.output(nodes[-1])
    gm = fx.GraphModule(torch.nn.Module(), graph)
    support = IndexSupport({f"n{i}" for i in range(n) if unsup[i]})
    t0 = time.perf_counter()
    part = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
    t1 = time.perf_counter()
    partitions = part.propose_partitions()
    t2 = time.perf_counter()
    print(f"fx_result init_s={t1 - t0:.3f} propose_s={t2 - t1:.3f} partitions={len(partitions)}",
          flush=True)


if __name__ == "__main__":
    sys.setrecursionlimit(max(10000, 4 * int(sys.argv[2]) + 1000))
    main()
