"""How a recorded launch changes with its config, inferred from the one launch recorded: its grid, the
size arguments padded to a tile, and the buffers sized by them.

A grid axis is explained, when it can be, as a product of cdiv(size, BLOCK_X) over tile parameters
BLOCK_X / BLOCK_SIZE_X / TILE_X of the config, times a leftover factor that does not depend on the
config (batch, heads). A size is either an integer argument named after the tile (X, x, n_x, size_x),
or a **padded size**: an integer argument S whose recorded value is another argument U padded for the
tile's value t, in one of the forms host code writes it --

    round_up(U, t)                  rows padded to whole tiles
    round_up(U + k * (t - 1), t)    the worst case of k groups each padded to whole tiles
    U + k * (t - 1),  U + k * t      the same, not rounded

-- with k a size the launch carries (a tensor's dimension or an integer argument, e.g. the number of
experts of a fused-MoE kernel: `EM` = tokens x top-k padded per expert to BLOCK_SIZE_M). A padded
size is taken only when its name ends in the tile's letter or a tensor has it as a dimension (a buffer
sized by it), and when it explains a grid axis. For another config, S is recomputed in its form, and
every tensor dimension equal to S (or to cdiv(S, t)) follows, so the grid and the buffers both follow
BLOCK_SIZE_M. What the names leave of an axis is then explained by values where one explanation is best
(`advisor.advice.grid_values`: cdiv(M, BLOCK_ROW_SIZE) with M no spelling of ROW); axes nothing explains,
or two explanations explain equally, keep their size (persistent grids, fixed batch axes), the latter
with a note. An axis the kernel strides a loop by (`for i in range(pid * B, n, tl.num_programs(0) * B)`: a
persistent grid, whose size the host picks, often the SM count) is kept as recorded for every config, before
any name or value could explain it: a tile's value that happens to divide the work into as many programs
(Liger's block RMS-norm backward: 2,112 rows / 16 = 132 = the H100's SMs) says nothing of how the host sizes
it, and a grid that followed it left programs' partial sums unwritten (RESULTS 34c). And an axis nothing
explains is kept as recorded only for tiles that do not set a program's share of the work: a parameter the
kernel multiplies a program id by (`start = pid_n * TILE_N * tiles_per_cta`) moves the grid in a way the
numbers did not tell, so configs that change it are not ranked (`pid_scaled_axes`).
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from advisor.advice.grid_values import TILE_WORDS, explain_by_value
from advisor.advice.operands import axis_arg, call_name, names_in
from advisor.advice.tile_bounds import masked_bounds
from ceilings import pysource
from ceilings.launch import Config, Launch, TensorArg

# The grid's rule reads only the long names (BLOCK_X, BLOCK_SIZE_X, TILE_X): the first of grid_values' tile words;
# the short ones (BX, X_BLOCK) are explained by value there.
TILE_PARAM = TILE_WORDS[0]
SIZE_SPELLINGS = ("{x}", "n_{x}", "size_{x}", "{x}_size", "n{x}")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _cdiv(a, b) * b


_FORMS: dict[str, Callable[[int, int, int], int]] = {
    "round_up(U, t)": lambda u, k, t: _round_up(u, t),
    "round_up(U + k*(t-1), t)": lambda u, k, t: _round_up(u + k * (t - 1), t),
    "U + k*(t-1)": lambda u, k, t: u + k * (t - 1),
    "U + k*t": lambda u, k, t: u + k * t,
}


@dataclass(frozen=True)
class PaddedSize:
    """An integer argument `name` = form(`base` argument's value U, k, the tile parameter's value t)."""

    name: str
    tile: str
    base: str
    base_value: int
    k: int
    form: str

    def value(self, config: Config) -> int:
        return _FORMS[self.form](self.base_value, self.k, int(config[self.tile]))

    def describe(self) -> str:
        # k first: the base is a name that may hold a k of its own (num_valid_tokens)
        return (f"{self.name} = {self.form.replace('k', str(self.k)).replace('U', self.base)} with t = "
                f"{self.tile}")


def _int_scalars(launch: Launch) -> dict[str, int]:
    return {k: v for k, v in launch.scalars if isinstance(v, int) and not isinstance(v, bool) and v > 0}


def _int_constexprs(launch: Launch) -> dict[str, int]:
    return {k: v for k, v in launch.constexprs if isinstance(v, int) and not isinstance(v, bool) and v > 0}


def named_tiles(launch: Launch, spellings: Sequence[str] = SIZE_SPELLINGS) -> list[tuple[str, int]]:
    """(tile parameter, size it tiles) pairs: BLOCK_X / BLOCK_SIZE_X / TILE_X of the config matched, case
    ignored, to a positive integer argument of the launch spelled as one of `spellings` of X, a runtime
    one or a constexpr (GemLite passes N and K as constexprs: its grid follows BLOCK_SIZE_N all the same)."""
    lower = {k.lower(): v for k, v in {**_int_constexprs(launch), **_int_scalars(launch)}.items()}
    out = []
    for name, value in launch.config.params.items():
        m = TILE_PARAM.match(name)
        if not m or not isinstance(value, int) or value <= 0:
            continue
        x = m.group(1).lower()
        for spelling in spellings:
            if lower.get(spelling.format(x=x), 0) > 0:
                out.append((name, lower[spelling.format(x=x)]))
                break
    return out


# A tensor's stride is set by its layout, never padded to a tile (torchao's x_stride_dim_0 = 4096 fitted
# round_up(x_stride_dim_1 + 32 (t-1), t) by the numbers alone).
_STRIDE = re.compile(r"stride", re.I)


def padded_sizes(launch: Launch, skip: set[str] = frozenset()) -> list[PaddedSize]:
    """The padded size arguments of a launch (see the module docstring), one per tile parameter at most."""
    scalars = _int_scalars(launch)
    dims = {d for t in launch.tensors for d in t.shape if d > 1}
    ks = sorted(dims | {v for v in scalars.values() if v > 1})
    out = []
    for tile, t in launch.config.params.items():
        m = TILE_PARAM.match(tile)
        if not m or tile in skip or not isinstance(t, int) or t <= 1:
            continue
        letter = m.group(1).lower()
        candidates = []
        for name, s0 in scalars.items():
            named = name.lower().endswith(letter)
            if not (named or s0 in dims) or _STRIDE.search(name):
                continue
            for base, u in scalars.items():
                if base == name or not 0 < u < s0 or _STRIDE.search(base):
                    continue
                for rank, (form, fn) in enumerate(_FORMS.items()):
                    if form == "round_up(U, t)":
                        k = 0 if u % t and fn(u, 0, t) == s0 else None
                    elif not named:
                        # k groups each padded: a size in the launch for k makes these forms fit many numbers
                        # (flash-attn's seqlen_q = round_up(nheads + 16 (t-1), t)); only a size named for the tile
                        k = None
                    else:
                        k = next((k for k in ks if fn(u, k, t) == s0), None)
                    if k is not None:
                        # A name spelled after the tile first, then the forms in their order.
                        candidates.append(((not name.lower().endswith(letter), rank),
                                           PaddedSize(name, tile, base, u, k, form)))
        found = min(candidates, key=lambda c: c[0])[1] if candidates else None
        if found is not None:
            out.append(found)
    return out


@dataclass
class LaunchRule:
    """A launch for any config of the kernel (see the module docstring)."""

    launch: Launch
    axes: list[tuple[list[tuple[str, Callable[[Config], int]]], int]]
    padded: list[PaddedSize]
    inferred: list[str] = field(default_factory=list)  # what the values explained, and what they could not
    unsure: frozenset[str] = frozenset()  # tiles an axis was kept for: two explanations explained it equally

    def grid(self, config: Config) -> tuple[int, ...]:
        return tuple(factor * math.prod(_cdiv(dim(config), int(config[name])) for name, dim in combo)
                     for combo, factor in self.axes)

    def __call__(self, config: Config) -> Launch:
        base = self.launch
        if not self.padded:
            return Launch(base.source, base.kernel, self.grid(config), base.tensors, base.scalars, base.constexprs,
                          config)
        resize: dict[int, int] = {}
        scalars = dict(base.scalars)
        for p in self.padded:
            old_t, new_t = int(base.config[p.tile]), int(config[p.tile])
            new = p.value(config)
            scalars[p.name] = new
            resize[scalars_value(base, p.name)] = new
            resize.setdefault(_cdiv(scalars_value(base, p.name), old_t), _cdiv(new, new_t))
        tensors = tuple(_resized(t, resize) for t in base.tensors)
        return Launch(base.source, base.kernel, self.grid(config), tensors, tuple(scalars.items()), base.constexprs,
                      config)

    def unknown_grid(self, config: Config) -> str | None:
        """Why this rule cannot give `config` its grid: it changes a tile an axis was kept for (its note)."""
        changed = sorted(t for t in self.unsure if config.params.get(t) != self.launch.config.params.get(t))
        if not changed:
            return None
        return (f"changes {', '.join(changed)}, whose effect on the grid the recorded launch does not tell "
                "(two explanations of a grid axis tie; see the notes)")

    def notes(self) -> list[str]:
        return [f"for other configs, {p.describe()} (inferred from the recorded launch), with the grid and the "
                "buffers sized by it" for p in self.padded] + list(self.inferred)


def scalars_value(launch: Launch, name: str) -> int:
    return int(dict(launch.scalars)[name])


def _resized(t: TensorArg, resize: dict[int, int]) -> TensorArg:
    if not any(d in resize for d in t.shape):
        return t
    shape = tuple(resize.get(d, d) for d in t.shape)
    if t.stride == TensorArg.contiguous(t.name, t.shape, t.dtype).stride:
        stride = TensorArg.contiguous(t.name, shape, t.dtype).stride
    else:
        stride = t.stride
    # Recorded contents (a routing table) belong to the recorded config's padding.
    return dataclasses.replace(t, shape=shape, stride=stride, values=None)


def file_defs(launch: Launch) -> dict[str, ast.FunctionDef]:
    """The functions defined at the top of the launch's source file, by name (the kernel and its helpers)."""
    try:
        tree = pysource.parse(Path(launch.source).read_text())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return {}
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _calls(node: ast.AST, what: str) -> bool:
    return any(isinstance(n, ast.Call) and call_name(n) == what for n in ast.walk(node))


def pid_scaled_axes(kernel: ast.FunctionDef | None, params: set[str]) -> dict[str, set[int | None]]:
    """The config's parameters (`params`) that the kernel multiplies a program id by (cta_start = pid *
    TILE_N * tiles_per_cta), directly or through names assigned from them, each with the grid axes whose
    program id it is multiplied by (None: an axis the source does not spell as a constant;
    `tl.program_id(0) * BLOCK_ROWS` ties BLOCK_ROWS to axis 0). Each sets how much work one program covers,
    so the grid follows it, whether or not the recorded launch's numbers tell how."""
    if kernel is None:
        return {}
    tiles = {p: {p} for p in params}  # name -> the parameters it carries
    pids: dict[str, set[int | None]] = {}  # name -> the axes whose program id it follows

    def axes_of(node: ast.AST) -> set[int | None]:
        found = {axis_arg(c) for c in ast.walk(node) if isinstance(c, ast.Call) and call_name(c) == "program_id"}
        return found.union(*(pids[x] for x in names_in(node) if x in pids))

    assigns = [(n.targets, n.value) for n in ast.walk(kernel) if isinstance(n, ast.Assign)]
    assigns += [([n.target], n.value) for n in ast.walk(kernel) if isinstance(n, ast.AnnAssign) and n.value]
    assigns = [pair for targets, value in assigns for pair in _unpacked(targets, value)]
    # index arithmetic only: a value loaded through a program's pointer is data, not a position
    assigns = [(t, v) for t, v in assigns if not _calls(v, "load")]
    for _ in range(3):  # names built from names: a few passes reach the fixed point of a kernel body
        for targets, value in assigns:
            carried = set().union(*(tiles.get(x, set()) for x in names_in(value)))
            from_pid = axes_of(value)
            for target in targets:
                if isinstance(target, ast.Name):
                    if carried and target.id not in params:
                        tiles[target.id] = tiles.get(target.id, set()) | carried
                    if from_pid:
                        pids[target.id] = pids.get(target.id, set()) | from_pid
    scaled: dict[str, set[int | None]] = {}
    for node in ast.walk(kernel):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and not _calls(node, "load"):
            for a, b in ((node.left, node.right), (node.right, node.left)):
                axes = axes_of(a)
                if axes:
                    for tile in set().union(*(tiles.get(x, set()) for x in names_in(b))):
                        scaled[tile] = scaled.get(tile, set()) | axes
    return scaled


def _unpacked(targets: list[ast.expr], value: ast.expr) -> list[tuple[list[ast.expr], ast.expr]]:
    """An assignment as (targets, value) pairs, a tuple of names bound from a tuple of values of the same length
    (`pid_m, pid_n = tl.program_id(0), tl.program_id(1)`) element by element, so each name follows its own; from
    one call of a helper of the file (`pid_m, pid_n = swizzle_tile(pid, M, N, BLOCK_M, BLOCK_N, GROUP)`) every
    name follows the whole of it, as the source cannot tell which part each gets. A tuple from a `tl.` function
    (`gate, up = tl.split(sums)`) is data split apart, not positions: its names follow nothing."""
    out: list[tuple[list[ast.expr], ast.expr]] = []
    for target in targets:
        if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List) \
                and len(target.elts) == len(value.elts):
            out += [([t], v) for t, v in zip(target.elts, value.elts, strict=True)]
        elif isinstance(target, ast.Tuple | ast.List):
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                out += [([t], value) for t in target.elts]
        else:
            out.append(([target], value))
    return out


def grid_stride_axes(kernel: ast.FunctionDef | None) -> set[int]:
    """The grid axes whose program count the kernel strides a `for` loop by: tl.num_programs(axis) in a
    `range` step, directly or through a name assigned from it, in the kernel's own body."""
    if kernel is None:
        return set()

    def axes_read(node: ast.AST, named: dict[str, set[int]]) -> set[int]:
        found: set[int] = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in named:
                found |= named[sub.id]
            if isinstance(sub, ast.Call) and call_name(sub) == "num_programs" and axis_arg(sub) is not None:
                found.add(axis_arg(sub))
        return found

    named: dict[str, set[int]] = {}
    for node in ast.walk(kernel):  # names bound from the program count (NUM_SMS = tl.num_programs(0))
        if isinstance(node, ast.Assign):
            read = axes_read(node.value, named)
            for target in node.targets:
                if read and isinstance(target, ast.Name):
                    named[target.id] = named.get(target.id, set()) | read
    strided: set[int] = set()
    for node in ast.walk(kernel):
        if (isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and len(node.iter.args) >= 3
                and call_name(node.iter) in ("range", "static_range")):
            strided |= axes_read(node.iter.args[2], named)
    return strided


def _loop_args(fn_def: ast.FunctionDef, defs: dict[str, ast.FunctionDef], rename: dict[str, set[str]] | None = None,
               depth: int = 0) -> list[list[set[str]]]:
    """Per `range`/`static_range` call of a kernel and of the JIT helpers of its file it passes names to
    (a few levels deep), the names in each argument, as the kernel spells them (a helper's parameter
    stands for the names of what the kernel passed it)."""
    def outer(names: set[str]) -> set[str]:
        return names if rename is None else set().union(*(rename.get(n, set()) for n in names))

    out = []
    for node in ast.walk(fn_def):
        if not isinstance(node, ast.Call):
            continue
        if call_name(node) in ("range", "static_range"):
            out.append([outer(names_in(a)) for a in node.args])
        helper = defs.get(getattr(node.func, "id", ""))
        if helper is not None and helper is not fn_def and depth < 3:
            params = [a.arg for a in helper.args.args]
            passed = {params[i]: outer(names_in(a)) for i, a in enumerate(node.args) if i < len(params)}
            passed.update({k.arg: outer(names_in(k.value)) for k in node.keywords if k.arg})
            out += _loop_args(helper, defs, passed, depth + 1)
    return out


def walked_tiles(kernel: ast.FunctionDef | None, launch: Launch, spellings: Sequence[str] = SIZE_SPELLINGS,
                 defs: dict[str, ast.FunctionDef] | None = None) -> set[str]:
    """The tiles the kernel walks its named size by in a loop (`for k in range(0, K, BLOCK_SIZE_K)`, or a trip
    count `range(0, tl.cdiv(K, BLOCK_K))`, in the kernel or a JIT helper of its file, `defs`, it passes them
    to): each program covers that size whole, so cdiv(size, tile) counts no programs of the grid, whatever the
    numbers say (torchao's colwise fp8 cast: E = 128 experts read as cdiv(K = 2048, BLOCK_SIZE_K = 128) x 8,
    RESULTS 37; this project's fp8 GEMV: 24 row blocks read as cdiv(K = 2048, BLOCK_K = 512) x 6)."""
    if kernel is None:
        return set()
    walked = set()
    loops = _loop_args(kernel, defs or {})
    for name in launch.config.params:
        m = TILE_PARAM.match(name)
        if not m:
            continue
        sizes = {spelling.format(x=m.group(1).lower()) for spelling in spellings}
        for args in loops:
            stepped = len(args) >= 3 and {n.lower() for n in args[1]} & sizes and name in args[2]
            counted = any({n.lower() for n in a} & sizes and name in a for a in args)
            if stepped or counted:
                walked.add(name)
    return walked


def stepped_tiles(kernel: ast.FunctionDef | None, launch: Launch,
                  defs: dict[str, ast.FunctionDef] | None = None) -> set[str]:
    """The config's parameters a loop of the kernel (or a JIT helper of its file) steps by from a constant start,
    `for start in range(0, seq_len, BLOCK_N)`: one program walks the whole range, so the tile counts no programs
    of the grid, whatever bound the loop has (a paged decode's sequence length, named after no tile) and whatever
    the numbers say (its 4 sequences read as cdiv(a 256-wide dimension, BLOCK_N = 64), so BLOCK_N was not ranked
    and a 1.95x faster BLOCK_N went untried, RESULTS 54). A start a program id sets (split-K, split-KV) is
    another program's share: not counted."""
    if kernel is None:
        return set()
    params = set(launch.config.params)
    return {name for args in _loop_args(kernel, defs or {}) if len(args) == 3 and not args[0]
            for name in args[2] if args[2] == {name} and name in params}


def launch_rule(launch: Launch) -> LaunchRule:
    """The launch rule of a recorded launch: which tiles divide which grid axis, and its padded sizes."""
    defs = file_defs(launch)  # the source, parsed once for its questions
    kernel = defs.get(launch.kernel)
    persistent = {a for a in grid_stride_axes(kernel) if a < len(launch.grid)}
    walked = walked_tiles(kernel, launch, defs=defs) | stepped_tiles(kernel, launch, defs)
    scaled_axes = pid_scaled_axes(kernel, set(launch.config.params))
    # The size a grid tile's offsets are masked against, where the kernel says it, over the size its name suggests
    # (an implicit-GEMM convolution's BLOCK_N tiles the channels K, not the batch N: RESULTS 55); a grid tile is
    # one a program id is scaled by (a tile a loop steps by is masked against its dimension too, fla's BK).
    by_name = dict(named_tiles(launch))
    masked = {t: d for t, d in masked_bounds(kernel, launch).items() if t in scaled_axes and by_name.get(t) != d}
    sizes = {**by_name, **masked}
    named: list[tuple[str, Callable[[Config], int]]] = [(n, (lambda c, d=sizes[n]: d)) for n in launch.config.params
                                                        if n in sizes and n not in walked]
    padded = padded_sizes(launch, {n for n, _ in named} | walked)  # a walked tile counts no programs
    inferred = [(p.tile, p.value) for p in padded]
    tiles = named + inferred
    axes: list[tuple[list[tuple[str, Callable[[Config], int]]], int]] = []
    used: set[str] = set()
    current = launch.config
    for axis, size in enumerate(launch.grid):
        if axis in persistent:  # the host's choice, the same for every config
            axes.append(([], size))
            continue
        best = None
        free = [t for t in tiles if t[0] not in used]
        for r in range(len(free), 0, -1):
            for combo in combinations(free, r):
                counts = [_cdiv(dim(current), int(current[name])) for name, dim in combo]
                # One tile as long as its size divides any axis: an inferred padded size so is a coincidence, not a
                # rule; a named size so tiles this axis only where the kernel scales the axis's program id by the
                # tile (a GEMM's BLOCK_M = M), never by the numbers alone (a rotary kernel's BLOCK_HALF = HALF = 64
                # read as tiling its 16,384 token programs: a smaller BLOCK_HALF's grid ran past q, RESULTS 54).
                if any(n == 1 and (any(t is i for i in inferred) or not scaled_axes.get(t[0], set()) & {axis, None})
                       for t, n in zip(combo, counts, strict=True)):
                    continue
                # a tile the kernel scales a program id by tiles that id's axis only, whether its size is read from
                # the kernel's mask (every such tile is one) or named (`pid_v = tl.program_id(1)`, `pid_v * BLOCK_V`):
                # a decode step's batch x heads axis (4,096 = 4 x 1,024) divides by cdiv(V, BLOCK_V) too, and read
                # so, BLOCK_V = 16 ran programs past the heads (RESULTS 61)
                if any(t[0] in scaled_axes and not scaled_axes[t[0]] & {axis, None} for t in combo):
                    continue
                product = math.prod(counts)
                if product and size % product == 0:
                    best = (list(combo), size // product)
                    break
            if best:
                break
        if best:
            used.update(name for name, _ in best[0])
            axes.append(best)
        else:
            axes.append(([], size))
    # A padded size that explains no grid axis is a coincidence of numbers, not a rule.
    padded = [p for p in padded if p.tile in used]
    # sizes the names explained: no value coincidence may explain another axis with them, nor with a size named
    # after a tile one tile long (M = BLOCK_SIZE_M = 16 is no cdiv(M, SPLIT_K) of a split-K axis)
    named_values = {dim(current) for combo, _ in axes for _, dim in combo}
    named_values |= {dim(current) for name, dim in named if _cdiv(dim(current), int(current[name])) == 1}
    axes, inferred, unsure = explain_by_value(launch, axes, named_values, persistent, scaled_axes, walked)
    # An axis nothing explained is kept as recorded; a tile a program id is scaled by still moves it, in a
    # way the numbers did not tell (FlagGems' histogram: m * cdiv(n, tiles_per_cta * TILE_N)): such
    # configs are not ranked, as for a tie (RESULTS 34c: TILE_N 1024 -> 512 left half the rows uncounted).
    unexplained = [i for i, (combo, size) in enumerate(axes) if not combo and size >= 2 and i not in persistent]
    explained = {name for combo, _ in axes for name, _ in combo}
    moving = (set(scaled_axes) - explained - set(unsure)) if unexplained else set()
    if moving:
        unsure = set(unsure) | moving
        inferred.append(f"grid axis {', '.join(map(str, unexplained))} kept as recorded: no tile explains it, "
                        f"while the kernel scales a program id by {', '.join(sorted(moving))}, so configs that "
                        "change it are not ranked unless the host code is re-run")
    inferred += [f"grid axis {a} ({launch.grid[a]} programs) kept as recorded for every config: the kernel strides "
                 f"a loop by tl.num_programs({a}), so the host, not a tile, sizes it" for a in sorted(persistent)]
    return LaunchRule(launch, axes, padded, inferred, frozenset(unsure))
