"""The project's sqlglot dialect: the views' DuckDB SQL as Spark SQL that gives the same answers.

Stock sqlglot runs every view on Spark but is silently wrong on two: ``percentile_cont``
becomes the approximate ``PERCENTILE_APPROX`` and ``list(x ORDER BY k)`` loses its order. So
this dialect maps those exactly (Spark's exact ``percentile``; ``array_sort`` of
``collect_list`` of ``(k is null, k, x)`` structs), inlines the shared DuckDB macros from
:func:`hylo_analytics._sql.macro_definitions` (the one source of each), expands
``* EXCLUDE (...)`` from the known columns, keeps DuckDB's ``NULL`` of ``isnan(NULL)`` and of
``list()`` over no rows. Division by zero is the views' to avoid (DuckDB gives ``inf``, ANSI
Spark raises): they guard denominators, as the portability rules say.

Anything else is *refused*: every node of a view must be of a class listed in
:data:`EXACT` (constructs whose Spark SQL is known to compute the same value), or
:class:`UntranslatableSQL` names the view, the construct and its line. A refusal is a view
to rewrite portably (docs/architecture.md, "Portable SQL"), never an approximate answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark

from hylo_analytics._sql import inline_table_macros, macro_definitions

__all__ = ["EXACT", "HyloSpark", "UntranslatableSQL", "to_spark"]


class UntranslatableSQL(ValueError):
    """A view uses a construct the dialect cannot translate to Spark SQL exactly."""

    def __init__(self, view: str, construct: str, line: int | None, why: str) -> None:
        where = f", line {line}" if line else ""
        super().__init__(f"view {view}{where}: {construct}: {why}")
        self.view, self.construct, self.line = view, construct, line


# Node classes whose Spark SQL (as sqlglot writes it, or as this dialect rewrites it) computes
# exactly what DuckDB does on the views' types. Adding one is a claim the parity tests check.
EXACT: frozenset[type[exp.Expr]] = frozenset(
    {
        # query structure
        exp.Select, exp.From, exp.Join, exp.Where, exp.Group, exp.GroupingSets, exp.Having,
        exp.Order, exp.Ordered, exp.With, exp.CTE, exp.Subquery, exp.Union, exp.TableAlias,
        exp.Table, exp.Column, exp.Identifier, exp.Star, exp.Alias, exp.Paren, exp.Tuple,
        exp.Values, exp.Window, exp.WindowSpec, exp.Filter, exp.Distinct, exp.Limit,
        exp.Literal, exp.Boolean, exp.Null, exp.DataType, exp.Cast, exp.Struct, exp.PropertyEQ,
        exp.Array, exp.Dot, exp.In, exp.Exists,
        # operators
        exp.And, exp.Or, exp.Not, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Is,
        exp.NullSafeEQ, exp.NullSafeNEQ, exp.Like, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg,
        exp.Case, exp.If, exp.Between,
        # scalar functions
        exp.Coalesce, exp.Nullif, exp.Greatest, exp.Least, exp.Sqrt, exp.Abs, exp.Substring,
        exp.Lower, exp.Upper, exp.IsNan, exp.Grouping, exp.Exp, exp.Ln,
        exp.Round,  # of a positive double to an integer: half away from zero in both
        # aggregates and window functions
        exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.StddevSamp, exp.LogicalOr,
        exp.LogicalAnd, exp.ArgMax, exp.ArgMin, exp.AnyValue, exp.IgnoreNulls, exp.RowNumber, exp.ArrayAgg,
        exp.PercentileCont, exp.WithinGroup, exp.Median,
    }
)  # fmt: skip

# The first DuckDB default that differs: ORDER BY puts NULLs last; list() keeps NULLs.
_REASONS: dict[type[exp.Expr], str] = {
    exp.ApproxQuantile: "an approximate quantile has no exact Spark equivalent",
    exp.PercentileDisc: "percentile_disc is not mapped exactly (use percentile_cont)",
    exp.ApproxDistinct: "an approximate count has no exact Spark equivalent",
    exp.Anonymous: "a function sqlglot does not know (and not a shared macro)",
}


class HyloSpark(Spark):
    """Spark SQL, with the exact forms of what stock sqlglot maps approximately."""

    class Generator(Spark.Generator):  # type: ignore[misc,valid-type]
        # stock transforms of these win over the methods below: drop them
        TRANSFORMS: ClassVar[dict[type[exp.Expr], Any]] = {
            k: v
            for k, v in Spark.Generator.TRANSFORMS.items()
            if k not in {exp.WithinGroup, exp.PercentileCont, exp.Median, exp.IsNan}
            and k not in {exp.ArrayAgg, exp.Filter}
        }

        def withingroup_sql(self, expression: exp.WithinGroup) -> str:
            agg, order = expression.this, expression.expression
            if not isinstance(agg, exp.PercentileCont) or len(order.expressions) != 1:
                raise _Refusal(expression, "only percentile_cont(q) WITHIN GROUP is mapped")
            key = order.expressions[0]
            if key.args.get("desc"):
                raise _Refusal(expression, "a descending percentile is not mapped exactly")
            return f"PERCENTILE({self.sql(key.this)}, {self.sql(agg.this)})"

        def percentilecont_sql(self, expression: exp.PercentileCont) -> str:
            # quantile_cont(x, q): Spark's ``percentile`` is the exact linear interpolation
            return f"PERCENTILE({self.sql(expression.this)}, {self.sql(expression.expression)})"

        def median_sql(self, expression: exp.Median) -> str:
            return f"PERCENTILE({self.sql(expression.this)}, 0.5)"

        def isnan_sql(self, expression: exp.IsNan) -> str:
            x = self.sql(expression.this)  # DuckDB: isnan(NULL) is NULL, Spark's is false
            return f"CASE WHEN ({x}) IS NULL THEN NULL ELSE ISNAN({x}) END"

        def arrayagg_sql(self, expression: exp.ArrayAgg) -> str:
            return self._ordered_list(expression, None)

        def filter_sql(self, expression: exp.Filter) -> str:
            if isinstance(expression.this, exp.ArrayAgg):
                return self._ordered_list(expression.this, expression.expression)
            return str(super().filter_sql(expression))

        def _ordered_list(self, agg: exp.ArrayAgg, where: exp.Where | None) -> str:
            """``list([distinct] x [ORDER BY k, ...]) [FILTER (...)]`` with DuckDB's meaning."""
            if isinstance(agg.parent, exp.Window):
                raise _Refusal(agg, "list() as a window function is not mapped")
            inner = agg.this
            keys: list[exp.Ordered] = []
            if isinstance(inner, exp.Order):
                keys = list(inner.expressions)
                inner = inner.this
            distinct = isinstance(inner, exp.Distinct)
            if distinct:
                if len(inner.expressions) != 1:
                    raise _Refusal(agg, "list(DISTINCT a, b) is not mapped")
                inner = inner.expressions[0]
            for k in keys:
                if k.args.get("desc") or k.args.get("nulls_first"):
                    raise _Refusal(agg, "list(... ORDER BY k DESC / NULLS FIRST) is not mapped")
                if distinct and k.this != inner:
                    raise _Refusal(agg, "list(DISTINCT x ORDER BY another key) is not mapped")
            fields = []
            for i, k in enumerate(keys):  # DuckDB sorts NULLs last: (k is null, k) first
                key = self.sql(k.this)
                fields += [f"'n{i}', ({key}) IS NULL", f"'k{i}', {key}"]
            if not distinct:
                fields.append(f"'v', {self.sql(inner)}")  # a struct: NULL values are kept
            elif not keys:
                fields += [f"'n0', ({self.sql(inner)}) IS NULL", f"'v', {self.sql(inner)}"]
            else:
                fields.append(f"'v', {self.sql(inner)}")
            collect = "COLLECT_SET" if distinct else "COLLECT_LIST"
            agg_sql = f"{collect}(NAMED_STRUCT({', '.join(fields)}))"
            if where is not None:
                agg_sql += f" FILTER({self.sql(where)})"
            # DuckDB's list() over no rows is NULL, Spark's collect_list an empty array
            return (
                f"CASE WHEN SIZE({agg_sql}) = 0 THEN NULL "
                f"ELSE TRANSFORM(ARRAY_SORT({agg_sql}), s -> s.v) END"
            )


class _Refusal(Exception):
    """Raised inside the generator; :func:`to_spark` names the view and the line."""

    def __init__(self, node: exp.Expr, why: str) -> None:
        super().__init__(why)
        self.node, self.why = node, why


@cache
def _macros() -> dict[str, tuple[tuple[str, ...], exp.Expr]]:
    return {
        name: (params, sqlglot.parse_one(body, read="duckdb"))
        for name, (params, body) in macro_definitions().items()
    }


def _line(node: exp.Expr) -> int | None:
    lines = [n.meta["line"] for n in node.walk() if "line" in n.meta]
    return min(lines) if lines else None


def _construct(node: exp.Expr) -> str:
    text = node.sql(dialect="duckdb")
    return text if len(text) <= 80 else text[:77] + "..."


def _inline_macros(tree: exp.Expr) -> exp.Expr:
    """Replace each call of a shared macro by its body, arguments substituted."""
    macros = _macros()

    def expand(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Anonymous) or node.name.lower() not in macros:
            return node
        params, body = macros[node.name.lower()]
        args = node.expressions
        if len(args) != len(params):
            raise _Refusal(node, f"macro {node.name} takes {len(params)} arguments")
        bound = dict(zip(params, args, strict=True))

        def bind(n: exp.Expr) -> exp.Expr:
            if isinstance(n, exp.Column) and not n.table and n.name in bound:
                return exp.Paren(this=bound[n.name].copy())
            return n

        return exp.Paren(this=_inline_macros(body.copy().transform(bind)))

    return tree.transform(expand)


def _output_columns(
    query: exp.Expr, ctes: Mapping[str, exp.Expr], columns: Mapping[str, Sequence[str]]
) -> list[str]:
    """The column names a SELECT returns, its stars expanded from CTEs and known relations."""
    if isinstance(query, exp.Subquery):
        query = query.this
    if not isinstance(query, exp.Select):
        raise _Refusal(query, "the columns of this relation are not known (for * EXCLUDE)")
    out: list[str] = []
    for proj in query.expressions:
        if isinstance(proj, exp.Star):
            if query.args.get("joins"):
                raise _Refusal(proj, "* over a join cannot be expanded (for * EXCLUDE)")
            source = query.args["from_"].this
            if not isinstance(source, exp.Table):
                raise _Refusal(proj, "* over a subquery cannot be expanded (for * EXCLUDE)")
            name = source.name
            if name in ctes:
                found = _output_columns(ctes[name], ctes, columns)
            elif name in columns:
                found = list(columns[name])
            else:
                raise _Refusal(proj, f"the columns of {name} are not known (for * EXCLUDE)")
            dropped = {c.name for c in proj.args.get("except_") or []}
            out += [c for c in found if c not in dropped]
        else:
            out.append(proj.alias_or_name)
    return out


def _expand_excludes(tree: exp.Expr, columns: Mapping[str, Sequence[str]]) -> None:
    """``* EXCLUDE (a)`` (Spark SQL has no such star) as the list of the other columns."""
    ctes = {cte.alias: cte.this for cte in tree.find_all(exp.CTE)}
    for select in list(tree.find_all(exp.Select)):
        stars = [p for p in select.expressions if isinstance(p, exp.Star)]
        if not any(s.args.get("except_") for s in stars):
            continue
        if any(s.args.get("replace") or s.args.get("rename") for s in stars):
            raise _Refusal(stars[0], "* REPLACE / RENAME is not mapped")
        names = _output_columns(select, ctes, columns)
        select.set("expressions", [exp.column(n, quoted=True) for n in names])


def to_spark(name: str, sql: str, columns: Mapping[str, Sequence[str]] | None = None) -> str:
    """View ``name``'s DuckDB ``sql`` as Spark SQL that computes the same rows.

    ``columns``: the column names of the relations it reads, for ``* EXCLUDE``. Raises
    :class:`UntranslatableSQL` for any construct without an exact translation.
    """
    try:
        trees = sqlglot.parse(inline_table_macros(sql), read="duckdb")
    except sqlglot.errors.ParseError as exc:
        raise UntranslatableSQL(
            name, "the SQL", None, f"DuckDB SQL that sqlglot cannot parse: {exc}"
        ) from exc
    if len(trees) != 1 or trees[0] is None:
        raise UntranslatableSQL(name, "the SQL", None, "a view is exactly one SELECT statement")
    tree = trees[0]
    try:
        tree = _inline_macros(tree)
        _expand_excludes(tree, columns or {})
        for node in tree.walk():
            kind = type(node)
            if kind not in EXACT:
                why = _REASONS.get(kind, "no exact Spark translation is known for it")
                raise _Refusal(node, f"{kind.__name__}: {why}")
            if isinstance(node, exp.Union) and node.args.get("by_name"):
                raise _Refusal(node, "UNION BY NAME is not mapped")
        return str(tree.sql(dialect=HyloSpark))
    except _Refusal as exc:
        raise UntranslatableSQL(name, _construct(exc.node), _line(exc.node), exc.why) from None
