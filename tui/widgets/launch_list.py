"""The left pane's tree: the file's kernels, and under each the launches known for it (grouped, for the
fused-MoE kernel, by model preset and TP size).

It tells the app what the person points at with its own messages: `KernelHighlighted` (the source follows
the cursor) and `LaunchChosen` (enter on a launch: compute its advice). A launch's label is cut between
its words to the pane's width (never `a_ptr[40`), and launches of traces and calls are numbered per
kernel, so no two read alike.
"""

from __future__ import annotations

import re
from dataclasses import replace

from rich.style import Style
from rich.text import Text
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from tui.figures import fit_words
from tui.launches import FileModel, Group, LaunchRef

NUMBERED = ("trace", "call", "json")  # launches told apart by a number: their labels can repeat


def kernel_of(data) -> str | None:
    """The kernel a tree node stands for: a kernel's own node, a launch of it, or a group of its launches."""
    if isinstance(data, LaunchRef):
        return data.kernel
    if isinstance(data, Group):
        return data.launches[0].kernel if data.launches else None
    return data if isinstance(data, str) else None


class LaunchList(Tree):
    """Kernel nodes hold the kernel's name, group nodes a `Group`, leaves a `LaunchRef`."""

    class KernelHighlighted(Message):
        """The cursor moved onto a kernel, a group or a launch of `kernel`."""

        def __init__(self, kernel: str) -> None:
            super().__init__()
            self.kernel = kernel

    class LaunchChosen(Message):
        """Enter (or a click) on a launch."""

        def __init__(self, ref: LaunchRef) -> None:
            super().__init__()
            self.ref = ref

    def __init__(self, **kwargs):
        super().__init__("kernels", **kwargs)

    def on_mount(self) -> None:
        self.show_root = False
        self.guide_depth = 2

    def show_model(self, model: FileModel, refs: list[LaunchRef]) -> TreeNode | None:
        """List `model`'s kernels and launches, then `refs` (a trace's); returns the first launch's leaf."""
        self.clear()
        first = None
        for kernel in model.kernels:
            self._kernel_node(kernel)
        for kernel, items in model.launches.items():
            for i, item in enumerate(items):
                if isinstance(item, Group):
                    group = self._kernel_node(kernel).add(item.label, data=item, expand=i == 0)
                    for ref in item.launches:
                        leaf = group.add_leaf(ref.label, data=ref)
                        first = first or leaf
                else:
                    leaf = self._kernel_node(kernel).add_leaf(item.label, data=item)
                    first = first or leaf
        for ref in refs:
            leaf, _ = self.add_launch(ref)
            first = first or leaf
        return first

    def add_launch(self, ref: LaunchRef, group: str | None = None) -> tuple[TreeNode, LaunchRef]:
        """A leaf for `ref` under its kernel, or under the kernel's group labelled `group` (made if new), and
        the ref as listed (numbered, for a trace's or a call's launch); the same launch again: its leaf."""
        kernel_node = self._kernel_node(ref.kernel)
        leaves = list(_leaves(kernel_node))
        same = next((leaf for leaf in leaves if leaf.data.key == ref.key), None)
        if same is not None:
            return same, same.data
        if ref.kind in NUMBERED:
            n = 1 + sum(1 for leaf in leaves if leaf.data.kind in NUMBERED)
            ref = replace(ref, label=f"#{n} {ref.label}")
        parent = kernel_node
        if group is not None:
            node = next((g for g in parent.children if isinstance(g.data, Group) and g.data.label == group), None)
            if node is None:
                parent = parent.add(group, data=Group(group, [ref]), expand=True)
            else:
                node.data.launches.append(ref)
                node.expand()
                parent = node
        return parent.add_leaf(ref.label, data=ref), ref

    def cursor_launch(self) -> LaunchRef | None:
        """The launch under the cursor, or the first launch of the group under it."""
        node = self.cursor_node
        data = node.data if node is not None else None
        if isinstance(data, Group) and data.launches:
            data = data.launches[0]
        return data if isinstance(data, LaunchRef) else None

    def render_label(self, node: TreeNode, base_style: Style, style: Style) -> Text:
        if not isinstance(node.data, LaunchRef):
            return super().render_label(node, base_style, style)
        depth, up = 0, node.parent
        while up is not None and up is not self.root:
            depth, up = depth + 1, up.parent
        indent = (depth + 1) * self.guide_depth
        width = max(self.scrollable_content_region.width - indent - 1, 8)
        label = fit_words(node.data.label, width)
        if " " not in label.removesuffix(" …"):  # only the number fits with the names: the sizes alone
            label = fit_words(re.sub(r"(?<= )\w+(?=\[)", "", node.data.label), width)
        text = Text(label)
        text.stylize(style)
        return text

    def _kernel_node(self, kernel: str) -> TreeNode:
        node = next((n for n in self.root.children if n.data == kernel), None)
        return node or self.root.add(Text(kernel, style="bold"), data=kernel, expand=True)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        kernel = kernel_of(event.node.data)
        if kernel:
            self.post_message(self.KernelHighlighted(kernel))

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        if isinstance(event.node.data, LaunchRef):
            self.post_message(self.LaunchChosen(event.node.data))


def _leaves(node: TreeNode):
    for child in node.children:
        if isinstance(child.data, LaunchRef):
            yield child
        yield from _leaves(child)
