"""node_tokens: one row per response token, logprobs aligned by position, ragged lists kept honest."""
from __future__ import annotations


def node(rows, rnd: int, node_id: str, ids: list, logprobs: list) -> None:
    rows.node("r", rnd, "t", node_id)
    source, line = rows._source_ids[("r", rnd, "t")], rows._lines[("r", rnd, "t")]
    rows.insert("node_payloads", source_id=source, line_no=line, response_token_ids=ids, response_logprobs=logprobs)


def test_tokens_unroll_in_order_with_their_logprobs(rows):
    node(rows, 1, "a", [5, 6, 7], [-0.1, -2.0, -0.3])
    node(rows, 1, "b", [9, 8], [-0.5])  # a logprob short
    node(rows, 2, "c", [4], [-0.2, -0.9])  # one too many
    node(rows, 2, "d", [], [])
    got = [(r["node_id"], r["position"], r["token_id"], r["logprob"]) for r in rows.query(
        'SELECT * FROM "node_tokens" ORDER BY "node_id", "position"')]
    assert got == [("a", 0, 5, -0.1), ("a", 1, 6, -2.0), ("a", 2, 7, -0.3),
                   ("b", 0, 9, -0.5), ("b", 1, 8, None), ("c", 0, 4, -0.2)]
    lowest = rows.one('SELECT "node_id", "token_id" FROM "node_tokens" WHERE "run_id" = ? ORDER BY "logprob" LIMIT 1', "r")
    assert lowest == {"node_id": "a", "token_id": 6}
