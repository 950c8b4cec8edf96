"""The rollout browser, a node's tree and token view, a run's state and settings, and the
chart fixes, through Starlette's TestClient on the demo warehouse (each checked against SQL)."""
from __future__ import annotations

import json
import re

import pytest

from tests.warehouse.serve.conftest import sql
from tests.warehouse.serve.test_app import a_run_with_tasks, charts_of


@pytest.fixture(scope="module")
def client(demo_url):
    from starlette.testclient import TestClient

    from warehouse.serve.app import create_app

    with TestClient(create_app(demo_url)) as c:
        yield c


def node_rows(html: str) -> int:
    table = html.split('id="nodes-table"')[1].split("</table>")[0] if 'id="nodes-table"' in html else ""
    return table.count("<tr>") - 1 if table else 0


def test_runs_page_shows_each_runs_state_and_filters_by_it(client, demo_url):
    html = client.get("/").text
    states = dict(sql(demo_url, 'SELECT "run_id", "state" FROM "run_state"'))
    for run_id, state in states.items():
        if f'data-run="{run_id}"' in html:
            assert re.search(rf'<tr data-run="{re.escape(run_id)}" data-state="{state}">', html)
    lost = [r for r, s in states.items() if s == "lost"]
    assert lost  # the sample's dangling run
    page = client.get("/", params={"state": "lost"}).text
    assert page.count('name="run" value=') == len(lost) and 'class="badge state-lost"' in page


def test_the_browser_filters_by_task_round_status_and_reward(client, demo_url):
    run_id = a_run_with_tasks(demo_url)
    # the round of a task with the most nodes the filter keeps (several tie on their count of
    # nodes, and one of those tied keeps none: ties are broken by name, not by hash order)
    task, rnd = sql(demo_url, 'SELECT "task", "round" FROM "nodes" WHERE "run_id" = ? GROUP BY ALL ORDER BY '
                              'count(*) FILTER ("status" = \'ok\' AND "reward" >= 0.1) DESC, 1, 2 LIMIT 1', run_id)[0]
    everything = client.get(f"/runs/{run_id}/nodes")
    assert everything.status_code == 200
    assert f'data-total="{sql(demo_url, "SELECT count(*) FROM nodes WHERE run_id = ?", run_id)[0][0]}"' in everything.text
    want = sorted(n for (n,) in sql(demo_url, 'SELECT "node_id" FROM "nodes" WHERE "run_id" = ? AND "task" = ? '
                                    'AND "round" = ? AND "status" = \'ok\' AND "reward" >= 0.1', run_id, task, rnd))
    assert 0 < len(want) < 100
    page = client.get(f"/runs/{run_id}/nodes", params={"task": task, "round": rnd, "status": "ok",
                                                       "reward_min": "0.1"}).text
    assert f'data-total="{len(want)}"' in page and node_rows(page) == len(want)
    assert sorted(re.findall(r'class="node-link" href="[^"]+">([^<]+)</a>', page)) == want
    assert client.get(f"/runs/{run_id}/nodes", params={"reward_min": "lots"}).status_code == 200  # ignored
    assert client.get("/runs/no_such_run/nodes").status_code == 404


def test_the_browser_pages_through_a_large_run(client, demo_url):
    run_id, n = sql(demo_url, 'SELECT "run_id", count(*) FROM "nodes" GROUP BY 1 ORDER BY 2 DESC LIMIT 1')[0]
    assert n > 100
    first = client.get(f"/runs/{run_id}/nodes").text
    assert node_rows(first) == 100 and 'id="next-page"' in first
    second = client.get(f"/runs/{run_id}/nodes", params={"offset": 100}).text
    assert node_rows(second) == n - 100


def test_node_page_has_its_tree_units_and_tokens(client, demo_url):
    # a child whose parent is in its own run, in a group of several siblings
    run_id, node_id, rnd, parent, group, ids, logprobs = sql(demo_url, '''
        SELECT c."run_id", c."node_id", c."round", c."parent_id", c."sibling_group",
               p."response_token_ids", p."response_logprobs"
        FROM "nodes" c JOIN "node_parents" np USING ("source_id", "line_no")
        JOIN "node_payloads" p USING ("source_id", "line_no")
        WHERE np."parent_found" AND np."parent_run_id" = c."run_id" AND len(p."response_token_ids") > 3
          AND c."exec_time" IS NOT NULL
          AND (SELECT count(*) FROM "nodes" s WHERE s."run_id" = c."run_id" AND s."round" = c."round"
               AND s."sibling_group" = c."sibling_group") > 1
        ORDER BY 1, 3, 2 LIMIT 1''')[0]
    html = client.get(f"/runs/{run_id}/nodes/{node_id}", params={"round": rnd}).text
    assert f'id="parent-link" href="/runs/{run_id}/nodes/{parent}' in html
    siblings = sql(demo_url, 'SELECT count(*) FROM "nodes" WHERE "run_id" = ? AND "round" = ? AND "sibling_group" = ?',
                   run_id, rnd, group)[0][0]
    assert html.split('id="siblings"')[1].split("</ul>")[0].count("<li") == siblings
    assert re.search(r'id="field-exec_time">[0-9.]+ (s|min)', html)
    # the page shows without its tokens, which it fetches from the address it names
    assert 'class="tok"' not in html
    src = html.split('id="tokens-section" data-src="')[1].split('"')[0].replace("&amp;", "&")
    assert src == f"?round={rnd}&part=tokens"
    html = client.get(f"/runs/{run_id}/nodes/{node_id}{src}").text
    assert html.lstrip().startswith('<div id="tokens-section">') and "<html" not in html
    assert html.count('class="tok"') == len(ids)
    lowest = min(range(len(ids)), key=lambda i: logprobs[i])
    assert f'title="#{lowest} id {ids[lowest]} ' in html
    if logprobs[lowest] < -0.7:  # probability under one half: one of the least likely spans holds it
        table = html.split('id="lowest-spans"')[1].split("</table>")[0]
        spans = [(int(a), int(b or a)) for a, b in re.findall(r'href="#tok-(\d+)">\d+(?:–(\d+))?</a>', table)]
        assert any(a <= lowest <= b for a, b in spans), spans
    # the parent's page lists this node among its children
    parent_round = sql(demo_url, 'SELECT np."parent_round" FROM "nodes" c JOIN "node_parents" np '
                                 'USING ("source_id", "line_no") WHERE c."run_id" = ? AND c."node_id" = ? '
                                 'AND c."round" = ?', run_id, node_id, rnd)[0][0]
    up = client.get(f"/runs/{run_id}/nodes/{parent}", params={"round": parent_round}).text
    assert f"/nodes/{node_id}?round={rnd}" in up.split('id="children"')[1]


def test_node_page_links_a_parent_in_an_earlier_run_of_the_lineage_both_ways(client, demo_url):
    """A resumed run's node whose parent lives in a run it resumed from, two links back where
    the demo has one: its page links that parent, and the parent's page lists it among its
    children (a child is looked for in the node's run and every run resumed from it)."""
    run_id, node_id, rnd, parent_id, parent_run, parent_round = sql(demo_url, '''
        SELECT c."run_id", c."node_id", c."round", c."parent_id", np."parent_run_id", np."parent_round"
        FROM "nodes" c JOIN "node_parents" np USING ("source_id", "line_no")
        JOIN "run_lineage" l ON l."run_id" = c."run_id" AND l."ancestor_run_id" = np."parent_run_id"
        WHERE np."parent_found" AND np."parent_run_id" <> c."run_id"
        ORDER BY l."depth" DESC, 1, 3, 2 LIMIT 1''')[0]
    html = client.get(f"/runs/{run_id}/nodes/{node_id}", params={"round": rnd}).text
    assert f'id="parent-link" href="/runs/{parent_run}/nodes/{parent_id}' in html
    up = client.get(f"/runs/{parent_run}/nodes/{parent_id}", params={"round": parent_round}).text
    assert f"/runs/{run_id}/nodes/{node_id}?round={rnd}" in up.split('id="children"')[1]


def test_tokens_decode_with_the_runs_tokenizer(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers

    from warehouse.serve.rollouts import tokens

    vocab = {"[UNK]": 0, "hello": 1, "world": 2, "!": 3}
    tok = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    seen = tokens({"response_token_ids": [1, 2, 3], "response_logprobs": [-0.01, -3.0, -0.2]},
                  {"model": "x", "overrides": json.dumps({"model_dir": str(tmp_path)})})
    assert seen.decoded and [t["text"] for t in seen.tokens] == ["hello", "world", "!"]
    assert [(s["start"], s["end"], s["text"]) for s in seen.lowest] == [(1, 1, "world")]
    ids_only = tokens({"response_token_ids": [1, 2], "response_logprobs": [-0.1]}, {"model": "nowhere"})
    assert not ids_only.decoded and [t["text"] for t in ids_only.tokens] == ["⟨1⟩", "⟨2⟩"]
    assert ids_only.tokens[1]["logprob"] is None  # fewer logprobs than tokens


def test_lowest_spans_join_neighbours_and_rank_by_summed_logprob():
    from warehouse.serve.rollouts import lowest_spans

    lps = [-0.1, -1.0, -2.0, -0.1, -2.5, -0.1]
    items = [{"position": i, "logprob": lp, "prob": 2.718281828 ** lp, "text": str(i)} for i, lp in enumerate(lps)]
    assert [(s["start"], s["end"], s["logprob"]) for s in lowest_spans(items, 5)] == [(1, 2, -3.0), (4, 4, -2.5)]


def test_run_page_shows_state_settings_and_checkpoints(client, demo_url):
    from warehouse.db import connect

    run_id = a_run_with_tasks(demo_url)
    with connect(demo_url) as con:
        con.execute('UPDATE "runs" SET "overrides" = ? WHERE "run_id" = ?',
                    [json.dumps({"response_cap": 999, "kl_coef": 0.02, "backend": "vllm", "backend_version": "0.26",
                                 "checkpoint_dir": "/nowhere"}), run_id])
    html = client.get(f"/runs/{run_id}").text
    state = sql(demo_url, 'SELECT "state" FROM "run_state" WHERE "run_id" = ?', run_id)[0][0]
    assert f'id="run-life" data-state="{state}"' in html
    arm = html.split('id="settings-arm"')[1].split("</table>")[0]
    assert "<th>response_cap</th><td class=\"text\">999</td><td class=\"source source-override\">" in arm
    assert "kl_coef" in html.split('id="settings-knobs"')[1].split("</table>")[0]
    assert "0.26" in html.split('id="settings-generation"')[1].split("</table>")[0]
    saved = sql(demo_url, 'SELECT count(DISTINCT "step") FROM "steps" WHERE "run_id" = ? AND "save_checkpoint_s" '
                          'IS NOT NULL', run_id)[0][0]
    if saved:
        table = html.split('id="checkpoints"')[1].split("</table>")[0]
        assert table.count("<tr>") == saved + 1 and f"/nowhere/{run_id}/global_step_" in table


def test_run_page_shows_the_sources_the_run_recorded_and_override_where_it_recorded_none(client, demo_url):
    from warehouse.db import connect

    def sources_shown(html: str, group: str) -> dict:
        table = html.split(f'id="settings-{group}"')[1].split("</table>")[0]
        return dict(re.findall(r'<tr><th>(\w+)</th><td class="text">[^<]*</td><td class="source [\w-]+">([^<]+)</td>',
                               table))

    run_id = a_run_with_tasks(demo_url)
    overrides = {"response_cap": 999, "kl_coef": 0.001, "update_epochs": 2, "backend": "hf", "backend_version": "4"}
    with connect(demo_url) as con:
        con.execute('UPDATE "runs" SET "overrides" = ?, "settings_sources" = NULL WHERE "run_id" = ?',
                    [json.dumps(overrides), run_id])
    html = client.get(f"/runs/{run_id}").text  # an ingested root's run: no sources recorded
    assert sources_shown(html, "arm")["response_cap"] == "override"
    assert sources_shown(html, "knobs") == {"kl_coef": "override", "update_epochs": "override"}
    assert sources_shown(html, "generation") == {"backend": "run", "backend_version": "run"}
    recorded = {"response_cap": "run", "kl_coef": "default", "update_epochs": "--set", "backend": "flag",
                "backend_version": "run"}
    with connect(demo_url) as con:
        con.execute('UPDATE "runs" SET "settings_sources" = ? WHERE "run_id" = ?', [json.dumps(recorded), run_id])
    html = client.get(f"/runs/{run_id}").text
    assert sources_shown(html, "arm")["response_cap"] == "run"
    assert sources_shown(html, "knobs") == {"kl_coef": "default", "update_epochs": "--set"}
    assert sources_shown(html, "generation") == {"backend": "flag", "backend_version": "run"}
    assert '<td class="source source-set">--set</td>' in html


def test_charts_drop_empty_series_use_plain_exponents_and_link_their_points(client, demo_url):
    run_id = a_run_with_tasks(demo_url)
    charts = charts_of(client.get(f"/runs/{run_id}").text)
    for chart in charts.values():
        assert chart["layout"]["yaxis"].get("exponentformat") == "e"
        for trace in chart["data"]:
            values = trace["x"] if trace["type"] == "histogram" else trace["y"]
            assert any(v is not None for v in values), trace["name"]
    box = charts["task-0-0"]["data"][0]
    node_id, rnd = box["customdata"][0]
    assert client.get(f"/runs/{run_id}/nodes/{node_id}", params={"round": rnd}).status_code == 200
    assert charts["task-0-1"]["data"][0]["meta"]["link"]["url"] == f"/runs/{run_id}/nodes"
    assert charts["task-0-4"]["data"][0]["meta"]["xs"]["round"] == charts["task-0-4"]["data"][0]["x"]


def test_a_run_with_no_rounds_draws_no_empty_axes(client, demo_url):
    from train.writer import RunRow, claim_run

    claim_run(demo_url, RunRow("empty_run", None, None, "test", 0))
    charts = charts_of(client.get("/runs/empty_run").text)
    assert charts["phases"]["data"] == [] and charts["phases"]["layout"]["meta"]["empty"]
    assert charts["phases"]["layout"]["xaxis"] == {"visible": False}


def commit(url: str, run_id: str, rounds: dict, resumed_from: dict | None = None, seed: int = 0) -> None:
    """Rounds of a run the way `train run` commits them: round -> adapter path its summary names."""
    from tests.warehouse.serve.conftest import _record
    from train.writer import RoundWrite, RunRow, commit_round

    run = RunRow(run_id, "hr24k_u6", None, "test", seed, resumed_from=resumed_from)
    for rnd, adapter in rounds.items():
        records = [_record(run_id, rnd, "cactus", i) for i in range(2)]
        summary = {"exp_id": run_id, "round": rnd, "nodes": 2, "valid": 1, "adapter_path": adapter}
        commit_round(url, run, RoundWrite(rnd, {"cactus": records}, {"cactus": summary}))


def global_steps(client, run_id: str) -> dict[int, int]:
    """round -> its x on the "global step (lineage)" axis, as the run page's charts carry it."""
    xs = charts_of(client.get(f"/runs/{run_id}").text)["task-0-4"]["data"][0]["meta"]["xs"]
    return dict(zip(xs["round"], xs["global"]))


def test_global_step_axis_puts_a_resumed_runs_points_after_its_parents(client, demo_url):
    """A resumed run that kept counting its rounds (the demo's, resumed at step 10 with round
    11) keeps them as global steps; one that restarts at round 1 continues from its parent's
    resume step, and so does a run resumed from that one: each child's points sit after the
    parent's points up to the step it resumed from, on the run page and on the compare page."""
    kept, parent, step = sql(demo_url, 'SELECT "run_id", "resumed_from_run", "resumed_from_step" FROM "runs" '
                                       'WHERE "resumed_from_run" IS NOT NULL AND "run_id" IN '
                                       '(SELECT "run_id" FROM "task_rounds") ORDER BY "run_id" DESC LIMIT 1')[0]
    kept_rounds = [r for (r,) in sql(demo_url, 'SELECT DISTINCT "round" FROM "task_rounds" WHERE "run_id" = ? '
                                               'ORDER BY 1', kept)]
    assert min(kept_rounds) > step  # the demo's resumed run kept counting
    assert global_steps(client, kept) == {r: r for r in kept_rounds}
    before = [x for r, x in global_steps(client, parent).items() if r <= step]
    assert before and max(before) < min(global_steps(client, kept).values())

    resume_at = max(kept_rounds)
    commit(demo_url, "restarted_child", {1: None, 2: None}, resumed_from={"run": kept, "step": resume_at})
    commit(demo_url, "restarted_grandchild", {1: None}, resumed_from={"run": "restarted_child", "step": 1})
    child = global_steps(client, "restarted_child")
    assert child == {1: resume_at + 1, 2: resume_at + 2}
    assert min(child.values()) > max(global_steps(client, kept).values())
    assert global_steps(client, "restarted_grandchild") == {1: child[1] + 1}

    traces = charts_of(client.get("/compare", params={"run": [kept, "restarted_child"]}).text)["compare"]["data"]
    on_axis = {t["legendgroup"]: t["meta"]["xs"]["global"] for t in traces if t["showlegend"]}
    assert max(on_axis[kept]) < min(on_axis["restarted_child"])


def test_run_page_lists_its_artifacts_and_its_seed(client, demo_url):
    """Artifacts: each adapter its round summaries name, with the first and last round naming
    it (an empty path is none); the seed is in the settings' run table."""
    rounds = {1: "/ckpt/step_1", 2: "/ckpt/step_1", 3: "/ckpt/step_3", 4: ""}
    commit(demo_url, "artifact_run", rounds, seed=1234)
    html = client.get("/runs/artifact_run").text
    table = html.split('id="artifacts"')[1].split("</table>")[0]
    found = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in table.split("<tr>")[2:]]
    assert found == [["adapter", "<code>/ckpt/step_1</code>", "1–2", "–", "–"],
                     ["adapter", "<code>/ckpt/step_3</code>", "3–3", "–", "–"]]
    run = html.split('id="settings-run"')[1].split("</table>")[0]
    assert '<tr><th>seed</th><td class="text">1234</td><td class="source source-run">run</td></tr>' in run


def test_a_reward_model_runs_artifacts_are_its_published_ones(client, demo_url):
    run_id, n = sql(demo_url, 'SELECT "run_id", count(*) FROM "rm_artifacts" GROUP BY 1 ORDER BY 1 LIMIT 1')[0]
    table = client.get(f"/runs/{run_id}").text.split('id="artifacts"')[1].split("</table>")[0]
    paths = re.findall(r"<code>(.*?)</code>", table)
    assert sorted(paths) == sorted(p for (p,) in sql(demo_url, 'SELECT "path" FROM "rm_artifacts" WHERE "run_id" = ?',
                                                     run_id)) and len(paths) == n


def test_a_long_response_is_drawn_in_part_until_asked(client, demo_url, monkeypatch):
    from warehouse.serve import rollouts

    run_id, node_id, rnd, n = sql(demo_url, '''
        SELECT n."run_id", n."node_id", n."round", len(p."response_token_ids")
        FROM "nodes" n JOIN "node_payloads" p USING ("source_id", "line_no")
        WHERE len(p."response_token_ids") > 5 ORDER BY 4 DESC, 1, 2 LIMIT 1''')[0]
    monkeypatch.setattr(rollouts, "SHOWN_TOKENS", 3)
    page = client.get(f"/runs/{run_id}/nodes/{node_id}", params={"round": rnd, "part": "tokens"}).text
    assert page.count('class="tok"') == 3 and f"{n} tokens, mean logprob" in page
    assert f'href="?round={rnd}&amp;tokens=all#tokens">Draw all {n}</a>' in page
    drawn_all = client.get(f"/runs/{run_id}/nodes/{node_id}", params={"round": rnd, "tokens": "all"}).text
    assert f'data-src="?round={rnd}&amp;tokens=all&amp;part=tokens"' in drawn_all  # what "Draw all" opens
    whole = client.get(f"/runs/{run_id}/nodes/{node_id}", params={"round": rnd, "tokens": "all", "part": "tokens"}).text
    assert whole.count('class="tok"') == n and 'id="tokens-more"' not in whole


def test_the_spans_and_mean_cover_the_tokens_not_drawn():
    from warehouse.serve.rollouts import tokens

    record = {"response_token_ids": [1, 2, 3, 4], "response_logprobs": [-0.1, -0.1, -0.1, -5.0]}
    part = tokens(record, {"model": "nowhere"}, shown=2)
    assert [t["position"] for t in part.tokens] == [0, 1] and part.total == 4
    assert part.lowest[0]["start"] == 3 and abs(part.mean_logprob - (-5.3 / 4)) < 1e-9
