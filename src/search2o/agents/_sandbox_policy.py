"""Compile-time policy of the expression sandbox: a RestrictedPython node transformer.

:func:`search2o.agents.expressions.compile_expression` passes :class:`_Policy` as ``policy=`` to
RestrictedPython's ``compile_restricted_eval`` (https://restrictedpython.readthedocs.io/
"usage/policy"). On top of RestrictedPython's own checks it

* refuses names and attributes starting with ``_`` (``__class__``, ``__import__`` ...), the
  names in :data:`_UNAVAILABLE_NAMES` (``print`` ...), ``:=`` and ``yield``; each error is a plain
  reason that becomes the ``ExpressionSyntaxError``'s reason;
* rewrites the operations that can build something large, iterate, or recurse into containers
  in one C call into calls of the run-time guards of :mod:`search2o.agents._sandbox_guards`:
  binary operators (``a ** b`` becomes ``_s2o_pow_(a, b)``), comparisons other than ``is``
  (``in`` included; a chain keeps Python's order and short-circuit), the keys of dict and set
  displays and comprehensions (hashed), f-string fields, ``*``/``**`` spreading, and the body
  of every ``lambda`` (one step per call).

The ``_s2o_*_`` names emitted here must match the keys of ``_sandbox_guards._GUARDS``.
"""

from __future__ import annotations

import ast
from typing import Any

from RestrictedPython.transformer import RestrictingNodeTransformer, copy_locations

_BINOP_GUARDS: dict[type[ast.operator], str] = {
    ast.Add: "_s2o_add_",
    ast.Sub: "_s2o_sub_",
    ast.Mult: "_s2o_mult_",
    ast.Mod: "_s2o_mod_",
    ast.Pow: "_s2o_pow_",
    ast.LShift: "_s2o_lshift_",
    ast.BitOr: "_s2o_or_",
    ast.BitAnd: "_s2o_and_",
    ast.BitXor: "_s2o_xor_",
}
_UNAVAILABLE_NAMES = frozenset({"print", "printed", "builtins", "breakpoint"})


def _call(guard: str, args: list[ast.expr], where: ast.expr) -> ast.Call:
    call = ast.Call(func=ast.Name(guard, ast.Load()), args=args, keywords=[])
    copy_locations(call, where)
    return call


class _Policy(RestrictingNodeTransformer):
    """RestrictedPython's policy plus our checks and the rewrites into ``_s2o_*_`` guards.

    See https://restrictedpython.readthedocs.io/ "usage/policy": a policy is a
    ``RestrictingNodeTransformer`` subclass passed as ``policy=`` to ``compile_restricted_eval``.
    Errors are plain reasons (no "Line 1:" prefix) because expressions are one-liners. The
    ``visit_*`` names are ``ast.NodeVisitor``'s (hence ``noqa: N802``).
    """

    def error(self, node: ast.AST, info: str) -> None:
        self.errors.append(info)

    def check_name(self, node: Any, name: str | None, allow_magic_methods: bool = False) -> None:
        if name is None:
            return
        if name.startswith("_") and name != "_":
            self.error(node, f"names starting with '_' are not allowed: {name!r}")
        elif name in _UNAVAILABLE_NAMES:
            self.error(node, f"{name!r} is not available in expressions")
        else:
            super().check_name(node, name, allow_magic_methods)

    def visit_Name(self, node: ast.Name) -> Any:  # noqa: N802
        if node.id in _UNAVAILABLE_NAMES:
            self.error(node, f"{node.id!r} is not available in expressions")
            return node
        return super().visit_Name(node)

    def visit_Attribute(self, node: ast.Attribute) -> Any:  # noqa: N802
        if node.attr.startswith("_"):
            self.error(node, f"names starting with '_' are not allowed: attribute {node.attr!r}")
            return node
        return super().visit_Attribute(node)

    def visit_BinOp(self, node: ast.BinOp) -> Any:  # noqa: N802
        node = self.node_contents_visit(node)
        guard = _BINOP_GUARDS.get(type(node.op))
        if guard is None:
            return node
        return _call(guard, [node.left, node.right], node)

    def visit_Compare(self, node: ast.Compare) -> Any:  # noqa: N802
        # a < b -> _s2o_compare_('Lt', a, b): comparing, hashing or scanning containers is one
        # C call the guard charges first. a < b < c -> _s2o_chain_(('Lt', 'Lt'), a, b,
        # lambda: c): each operand evaluated once, in order, c only if a < b holds.
        node = self.node_contents_visit(node)
        if all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            return node
        ops: list[ast.expr] = [ast.Constant(type(op).__name__) for op in node.ops]
        first = [node.left, node.comparators[0]]
        if len(ops) == 1:
            return _call("_s2o_compare_", [ops[0], *first], node)
        later: list[ast.expr] = []
        for operand in node.comparators[1:]:
            thunk = ast.Lambda(
                args=ast.arguments(
                    posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]
                ),
                body=operand,
            )
            copy_locations(thunk, operand)
            later.append(thunk)
        chain = ast.Tuple(elts=ops, ctx=ast.Load())
        copy_locations(chain, node)
        return _call("_s2o_chain_", [chain, *first, *later], node)

    def visit_Set(self, node: ast.Set) -> Any:  # noqa: N802
        # {a, *b} -> {_s2o_key_(a), *_s2o_keys_(b)}: every element is hashed.
        node = self.node_contents_visit(node)
        node.elts = [self._hashed(elt) for elt in node.elts]
        return node

    def visit_SetComp(self, node: ast.SetComp) -> Any:  # noqa: N802
        node = self.node_contents_visit(node)
        node.elt = self._hashed(node.elt)
        return node

    def visit_DictComp(self, node: ast.DictComp) -> Any:  # noqa: N802
        node = self.node_contents_visit(node)
        node.key = self._hashed(node.key)
        return node

    @staticmethod
    def _hashed(elt: ast.expr) -> ast.expr:
        """Wrap a key in ``_s2o_key_`` (``*items`` in ``_s2o_keys_``); constants hash in O(1)."""
        if isinstance(elt, ast.Starred):
            elt.value = _call("_s2o_keys_", [elt.value], elt.value)
            return elt
        if isinstance(elt, ast.Constant):
            return elt
        return _call("_s2o_key_", [elt], elt)

    def visit_FormattedValue(self, node: ast.FormattedValue) -> Any:  # noqa: N802
        # f'{value!c:spec}' -> f'{_s2o_format_(value, c, spec)}': the guard checks the spec's
        # widths and the size of the text before building it.
        node = self.node_contents_visit(node)
        spec: ast.expr = node.format_spec if node.format_spec is not None else ast.Constant("")
        call = _call("_s2o_format_", [node.value, ast.Constant(node.conversion), spec], node.value)
        new = ast.FormattedValue(value=call, conversion=-1, format_spec=None)
        copy_locations(new, node)
        return new

    def visit_Lambda(self, node: ast.Lambda) -> Any:  # noqa: N802
        # lambda args: body -> lambda args: _s2o_tick_() or body, so recursion costs steps.
        self.check_function_argument_names(node)
        node = self.node_contents_visit(node)
        body = ast.BoolOp(op=ast.Or(), values=[_call("_s2o_tick_", [], node.body), node.body])
        copy_locations(body, node.body)
        node.body = body
        return node

    def visit_Starred(self, node: ast.Starred) -> Any:  # noqa: N802
        node = self.node_contents_visit(node)
        if isinstance(node.ctx, ast.Load):
            node.value = _call("_s2o_spread_", [node.value], node.value)
        return node

    def visit_Dict(self, node: ast.Dict) -> Any:  # noqa: N802
        # {k: v, **m} -> {_s2o_key_(k): v, **_s2o_keys_(m)}: every key is hashed.
        node = self.node_contents_visit(node)
        for i, key in enumerate(node.keys):
            if key is None:  # {**mapping}
                node.values[i] = _call("_s2o_keys_", [node.values[i]], node.values[i])
            else:
                node.keys[i] = self._hashed(key)
        return node

    def visit_keyword(self, node: ast.keyword) -> Any:
        node = self.node_contents_visit(node)
        if node.arg is None:  # f(**mapping)
            node.value = _call("_s2o_spread_", [node.value], node.value)
        return node

    def visit_NamedExpr(self, node: ast.NamedExpr) -> Any:  # noqa: N802
        self.error(node, "assignment expressions (:=) are not allowed; expressions cannot assign")
        return node

    def visit_Yield(self, node: ast.Yield) -> Any:  # noqa: N802
        self.error(node, "yield is not allowed in expressions")
        return node

    def visit_YieldFrom(self, node: ast.YieldFrom) -> Any:  # noqa: N802
        self.error(node, "yield is not allowed in expressions")
        return node
