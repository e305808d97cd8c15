"""The fake batch APIs of `_provider_batch_server`, driven with plain HTTP calls: the tests of
a batch client trust what it answers, so what it answers is checked here first (states one
step per poll, rows answered when a job ends, the per-row errors in each provider's form,
expiry, cancelling, listing and the validation a real provider does)."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from _provider_batch_server import ProviderBatchServer

CHAT = "/v1/chat/completions"


# Plain HTTP to 127.0.0.1: `verify=False` spares each client loading the CA bundle (45 ms).


def openai_client(server: ProviderBatchServer) -> httpx2.Client:
    headers = {"authorization": "Bearer sk-x"}
    return httpx2.Client(base_url=server.openai_base, headers=headers, verify=False)


def anthropic_client(server: ProviderBatchServer) -> httpx2.Client:
    headers = {"x-api-key": "sk-ant", "anthropic-version": "2023-06-01"}
    return httpx2.Client(base_url=f"{server.anthropic_base}/v1", headers=headers, verify=False)


def gemini_client(server: ProviderBatchServer) -> httpx2.Client:
    headers = {"x-goog-api-key": "AIza-x"}
    return httpx2.Client(base_url=server.url, headers=headers, verify=False)


def chat(n: int, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"doc {n}"}], **extra}


def claude(n: int, **extra: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": f"Read doc {n}."}]
    return {"model": "claude-x", "max_tokens": 100, "messages": messages, **extra}


def gemini_request(n: int, **extra: Any) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": f"doc {n}"}]}], **extra}


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def read_jsonl(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.decode().splitlines()]


def openai_lines(docs: list[int], url: str = CHAT) -> list[dict[str, Any]]:
    body = chat if url == CHAT else (lambda n: {"model": "gpt-4o-mini", "input": f"doc {n}"})
    return [{"custom_id": f"row-{n}", "method": "POST", "url": url, "body": body(n)} for n in docs]


def openai_batch(
    client: httpx2.Client, lines: list[dict[str, Any]], endpoint: str = CHAT
) -> dict[str, Any]:
    files = {"file": ("batch.jsonl", jsonl(lines), "application/jsonl")}
    uploaded = client.post("/files", data={"purpose": "batch"}, files=files)
    assert uploaded.status_code == 200, uploaded.text
    body = {
        "input_file_id": uploaded.json()["id"],
        "endpoint": endpoint,
        "completion_window": "24h",
    }
    created = client.post("/batches", json=body)
    assert created.status_code == 200, created.text
    batch: dict[str, Any] = created.json()
    return batch


def poll(client: httpx2.Client, path: str, times: int) -> list[dict[str, Any]]:
    return [client.get(path).json() for _ in range(times)]


def test_an_openai_chat_job_from_upload_to_results_and_live_retries(
    server: ProviderBatchServer,
) -> None:
    lines = openai_lines([1, 7, 13, 23])
    with openai_client(server) as client:
        files = {"file": ("batch.jsonl", jsonl(lines), "application/jsonl")}
        uploaded = client.post("/files", data={"purpose": "batch"}, files=files).json()
        assert uploaded["object"] == "file" and uploaded["purpose"] == "batch"
        assert uploaded["bytes"] == len(jsonl(lines)) and uploaded["filename"] == "batch.jsonl"
        assert client.get(f"/files/{uploaded['id']}/content").content == jsonl(lines)
        body = {
            "input_file_id": uploaded["id"],
            "endpoint": CHAT,
            "completion_window": "24h",
            "metadata": {"run": "t1"},
        }
        batch = client.post("/batches", json=body).json()
        assert batch["id"].startswith("batch_") and batch["object"] == "batch"
        assert batch["status"] == "validating" and batch["metadata"] == {"run": "t1"}
        assert batch["output_file_id"] is None and batch["errors"] is None
        assert batch["request_counts"] == {"total": 0, "completed": 0, "failed": 0}
        assert server.submitted[("openai-chat", 7)] == 1
        assert server.jobs[0].requests == lines and server.jobs[0].family == "openai-chat"

        running = client.get(f"/batches/{batch['id']}").json()
        assert running["status"] == "in_progress" and running["in_progress_at"] is not None
        assert running["request_counts"] == {"total": 4, "completed": 0, "failed": 0}
        assert not server.answered  # rows are answered when the job ends
        done = client.get(f"/batches/{batch['id']}").json()
        assert done["status"] == "completed" and done["completed_at"] is not None
        assert done["request_counts"] == {"total": 4, "completed": 2, "failed": 2}

        output = read_jsonl(client.get(f"/files/{done['output_file_id']}/content").content)
        errors = read_jsonl(client.get(f"/files/{done['error_file_id']}/content").content)
        assert server.result_downloads[batch["id"]] == 2

    answers = {line["custom_id"]: line for line in output}
    assert set(answers) == {"row-1", "row-7"}
    for line in output:
        assert line["id"].startswith("batch_req_") and line["error"] is None
        assert line["response"]["status_code"] == 200
        completion = line["response"]["body"]
        assert completion["object"] == "chat.completion" and completion["model"] == "gpt-4o-mini"
        assert completion["choices"][0]["finish_reason"] == "stop"
        assert completion["usage"] == {
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "total_tokens": 15,
        }
    message = answers["row-1"]["response"]["body"]["choices"][0]["message"]
    assert json.loads(message["content"]) == {"n": 1}
    message = answers["row-7"]["response"]["body"]["choices"][0]["message"]
    assert message["content"] == "this is not JSON"

    failed = {line["custom_id"]: line["response"] for line in errors}
    assert failed["row-13"]["status_code"] == 400
    assert failed["row-13"]["body"]["error"]["type"] == "invalid_request_error"
    assert failed["row-23"]["status_code"] == 500
    assert set(failed["row-23"]["body"]["error"]) == {"message", "type", "param", "code"}
    assert server.answered == {("openai-chat", n): 1 for n in (1, 7, 13, 23)}

    with openai_client(server) as client:
        retried = {n: client.post("/chat/completions", json=chat(n)) for n in (7, 13, 23)}
    assert retried[7].json()["choices"][0]["message"]["content"] == '{"n": 7}'
    assert retried[23].status_code == 200
    assert retried[13].status_code == 400
    assert retried[13].json()["error"]["type"] == "invalid_request_error"
    assert server.live == {("openai-chat", n): 1 for n in (7, 13, 23)}
    assert server.answered[("openai-chat", 7)] == 2


def test_an_openai_responses_job_shows_finalizing_and_a_forced_function_call(
    server: ProviderBatchServer,
) -> None:
    server.polls_to_finish = 3
    tool = {"type": "function", "name": "emit", "parameters": {"type": "object"}}
    forced = {"tools": [tool], "tool_choice": {"type": "function", "name": "emit"}}
    lines = openai_lines([4, 57], url="/v1/responses")
    lines[1]["body"].update(forced)
    with openai_client(server) as client:
        batch = openai_batch(client, lines, endpoint="/v1/responses")
        states = poll(client, f"/batches/{batch['id']}", 3)
        output = read_jsonl(client.get(f"/files/{states[-1]['output_file_id']}/content").content)
    assert [state["status"] for state in states] == ["in_progress", "finalizing", "completed"]
    assert states[-1]["error_file_id"] is None
    bodies = {line["custom_id"]: line["response"]["body"] for line in output}
    plain = bodies["row-4"]
    assert plain["object"] == "response" and plain["status"] == "completed"
    assert plain["usage"]["total_tokens"] == 15
    [message] = plain["output"]
    assert message["type"] == "message" and message["role"] == "assistant"
    assert message["content"][0]["type"] == "output_text"
    assert message["content"][0]["text"] == '{"n": 4}'
    [call] = bodies["row-57"]["output"]  # 57 % 50 == 7: the first answer is wrong
    assert call["type"] == "function_call" and call["name"] == "emit"
    assert call["call_id"].startswith("call_") and json.loads(call["arguments"]) == {"wrong": True}
    assert server.answered[("openai-responses", 57)] == 1


def test_an_openai_forced_tool_live_ends_as_the_real_api_does(server: ProviderBatchServer) -> None:
    tool = {"type": "function", "function": {"name": "emit", "parameters": {"type": "object"}}}
    named = {"type": "function", "function": {"name": "emit"}}
    with openai_client(server) as client:
        first = client.post("/chat/completions", json=chat(7, tools=[tool], tool_choice=named))
        second = client.post("/chat/completions", json=chat(7, tools=[tool], tool_choice=named))
        required = client.post(
            "/chat/completions", json=chat(8, tools=[tool], tool_choice="required")
        )
    [call] = first.json()["choices"][0]["message"]["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "emit"
    assert json.loads(call["function"]["arguments"]) == {"wrong": True}
    choice = second.json()["choices"][0]
    assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == {"n": 7}
    assert choice["message"]["content"] is None and choice["finish_reason"] == "stop"
    assert required.json()["choices"][0]["finish_reason"] == "tool_calls"


def test_an_openai_batch_with_a_duplicate_custom_id_fails_validation(
    server: ProviderBatchServer,
) -> None:
    lines = openai_lines([1, 2, 3])
    lines[1]["custom_id"] = "row-1"
    lines[2]["url"] = "/v1/responses"
    with openai_client(server) as client:
        batch = openai_batch(client, lines)
        failed = client.get(f"/batches/{batch['id']}").json()
    assert failed["status"] == "failed" and failed["failed_at"] is not None
    assert failed["output_file_id"] is None and failed["error_file_id"] is None
    errors = failed["errors"]
    assert errors["object"] == "list"
    assert [(e["code"], e["line"]) for e in errors["data"]] == [
        ("duplicate_custom_id", 2),
        ("mismatched_url", 3),
    ]
    assert all(set(e) == {"code", "message", "param", "line"} for e in errors["data"])
    assert not server.answered and len(server.jobs) == 1


def test_openai_refuses_what_the_real_api_refuses(server: ProviderBatchServer) -> None:
    with openai_client(server) as client:
        files = {"file": ("batch.jsonl", b"{}\n", "application/jsonl")}
        wrong_purpose = client.post("/files", data={"purpose": "fine-tune"}, files=files)
        unknown_file = client.post(
            "/batches",
            json={"input_file_id": "file-nope", "endpoint": CHAT, "completion_window": "24h"},
        )
        unknown_batch = client.get("/batches/batch_nope")
        unknown_route = client.get("/nowhere")
    no_key = httpx2.post(f"{server.openai_base}/chat/completions", json=chat(1), verify=False)
    assert wrong_purpose.status_code == 400
    assert wrong_purpose.json()["error"]["type"] == "invalid_request_error"
    assert unknown_file.status_code == 400
    assert unknown_batch.status_code == 404
    assert unknown_route.status_code == 404 and "error" in unknown_route.json()
    assert no_key.status_code == 401 and not server.live


def test_an_anthropic_job_answers_half_when_it_expires_in_shuffled_order(
    server: ProviderBatchServer,
) -> None:
    server.expire_next = 1
    docs = [1, 7, 13, 23, 2, 3, 4, 5]
    requests = [{"custom_id": f"row-{n}", "params": claude(n)} for n in docs]
    with anthropic_client(server) as client:
        batch = client.post("/messages/batches", json={"requests": requests}).json()
        assert batch["id"].startswith("msgbatch_") and batch["type"] == "message_batch"
        assert batch["processing_status"] == "in_progress" and batch["results_url"] is None
        assert batch["request_counts"]["processing"] == 8
        assert batch["created_at"].endswith("Z")
        states = poll(client, f"/messages/batches/{batch['id']}", 2)
        ended = states[-1]
        results = client.get(ended["results_url"])
    assert [state["processing_status"] for state in states] == ["in_progress", "ended"]
    assert ended["results_url"] == f"{server.url}/v1/messages/batches/{batch['id']}/results"
    assert ended["ended_at"] is not None
    assert ended["request_counts"] == {
        "processing": 0,
        "succeeded": 2,
        "errored": 2,
        "canceled": 0,
        "expired": 4,
    }
    lines = read_jsonl(results.content)
    assert [line["custom_id"] for line in lines] != [r["custom_id"] for r in requests]
    result = {line["custom_id"]: line["result"] for line in lines}
    assert result["row-1"]["type"] == "succeeded"
    message = result["row-1"]["message"]
    assert message["type"] == "message" and message["role"] == "assistant"
    assert message["stop_reason"] == "end_turn" and message["model"] == "claude-x"
    assert message["content"] == [{"type": "text", "text": '{"n": 1}'}]
    assert result["row-7"]["message"]["content"][0]["text"] == "this is not JSON"
    assert result["row-13"] == {
        "type": "errored",
        "error": {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "doc 13 is an invalid request."},
        },
    }
    assert result["row-23"]["error"]["error"]["type"] == "overloaded_error"
    assert all(result[f"row-{n}"] == {"type": "expired"} for n in (2, 3, 4, 5))
    assert server.answered == {("anthropic", n): 1 for n in (1, 7, 13, 23)}
    assert server.submitted == {("anthropic", n): 1 for n in docs}
    assert server.result_downloads[batch["id"]] == 1
    assert server.expire_next == 0


def test_anthropic_live_and_its_validation(server: ProviderBatchServer) -> None:
    forced: dict[str, Any] = {"tools": [{"name": "emit", "input_schema": {"type": "object"}}]}
    forced["tool_choice"] = {"type": "tool", "name": "emit"}
    with anthropic_client(server) as client:
        overloaded = client.post("/messages", json=claude(73))
        again = client.post("/messages", json=claude(73, **forced))
        bad_id = client.post(
            "/messages/batches", json={"requests": [{"custom_id": "row 1", "params": claude(1)}]}
        )
        twice = [{"custom_id": "a", "params": claude(1)}, {"custom_id": "a", "params": claude(2)}]
        duplicate = client.post("/messages/batches", json={"requests": twice})
        streaming = client.post(
            "/messages/batches",
            json={"requests": [{"custom_id": "a", "params": claude(1, stream=True)}]},
        )
        unversioned = client.post("/messages", json=claude(1), headers={"anthropic-version": ""})
    assert overloaded.status_code == 529
    assert overloaded.json()["type"] == "error"
    assert overloaded.json()["error"]["type"] == "overloaded_error"
    message = again.json()
    assert message["stop_reason"] == "tool_use"
    [use] = message["content"]
    assert use["type"] == "tool_use" and use["name"] == "emit" and use["id"].startswith("toolu_")
    assert use["input"] == {"n": 73}
    for refused in (bad_id, duplicate, streaming, unversioned):
        assert refused.status_code == 400
        assert refused.json()["error"]["type"] == "invalid_request_error"
    assert not server.jobs and server.live == {("anthropic", 73): 2}


def test_a_gemini_inline_job(server: ProviderBatchServer) -> None:
    docs = [1, 7, 13, 23]
    entries = [{"request": gemini_request(n), "metadata": {"key": f"k{n}"}} for n in docs]
    body = {"batch": {"displayName": "t", "inputConfig": {"requests": {"requests": entries}}}}
    with gemini_client(server) as client:
        created = client.post("/v1beta/models/gemini-x:batchGenerateContent", json=body).json()
        name = created["name"]
        states = poll(client, f"/v1beta/{name}", 2)
    assert name.startswith("batches/") and "done" not in created
    metadata = created["metadata"]
    assert metadata["@type"].endswith(".GenerateContentBatch")
    assert metadata["model"] == "models/gemini-x" and metadata["displayName"] == "t"
    assert metadata["state"] == "BATCH_STATE_PENDING" and metadata["name"] == name
    assert metadata["batchStats"] == {"requestCount": "4", "pendingRequestCount": "4"}
    assert states[0]["metadata"]["state"] == "BATCH_STATE_RUNNING" and "done" not in states[0]
    done = states[1]
    assert done["done"] is True and done["metadata"]["state"] == "BATCH_STATE_SUCCEEDED"
    assert done["metadata"]["batchStats"] == {
        "requestCount": "4",
        "successfulRequestCount": "2",
        "failedRequestCount": "2",
    }
    response = done["response"]
    assert response["@type"].endswith(".GenerateContentBatchOutput")
    assert done["metadata"]["output"] == {k: v for k, v in response.items() if k != "@type"}
    rows = response["inlinedResponses"]["inlinedResponses"]
    assert [row["metadata"]["key"] for row in rows] == ["k1", "k7", "k13", "k23"]
    first = rows[0]["response"]
    assert first["candidates"][0]["content"] == {"role": "model", "parts": [{"text": '{"n": 1}'}]}
    assert first["candidates"][0]["finishReason"] == "STOP"
    assert first["usageMetadata"]["totalTokenCount"] == 15 and first["modelVersion"] == "gemini-x"
    assert rows[1]["response"]["candidates"][0]["content"]["parts"][0]["text"] == (
        "this is not JSON"
    )
    assert rows[2]["error"]["code"] == 400 and rows[2]["error"]["status"] == "INVALID_ARGUMENT"
    assert rows[3]["error"]["code"] == 500 and rows[3]["error"]["status"] == "INTERNAL"
    assert server.jobs[0].requests == entries


def test_a_gemini_file_job_with_a_resumable_upload(server: ProviderBatchServer) -> None:
    forced = {
        "tools": [{"functionDeclarations": [{"name": "emit"}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
    }
    lines = [{"key": f"k{n}", "request": gemini_request(n, **forced)} for n in (1, 7, 13, 2)]
    data = jsonl(lines)
    with gemini_client(server) as client:
        start = client.post(
            "/upload/v1beta/files",
            json={"file": {"displayName": "in"}},
            headers={
                "X-Goog-Upload-Protocol": "resumable",
                "X-Goog-Upload-Command": "start",
                "X-Goog-Upload-Header-Content-Length": str(len(data)),
                "X-Goog-Upload-Header-Content-Type": "application/jsonl",
            },
        )
        upload_url = start.headers["x-goog-upload-url"]
        assert upload_url.startswith(server.url)
        finished = httpx2.post(
            upload_url,
            verify=False,
            content=data,
            headers={"X-Goog-Upload-Command": "upload, finalize", "X-Goog-Upload-Offset": "0"},
        )
        uploaded = finished.json()["file"]
        assert uploaded["name"].startswith("files/") and uploaded["state"] == "ACTIVE"
        assert uploaded["sizeBytes"] == str(len(data)) and uploaded["displayName"] == "in"
        batch = {"batch": {"inputConfig": {"fileName": uploaded["name"]}}}
        created = client.post("/v1beta/models/gemini-x:batchGenerateContent", json=batch).json()
        done = poll(client, f"/v1beta/{created['name']}", 2)[-1]
        responses_file = done["response"]["responsesFile"]
        assert done["metadata"]["output"] == {"responsesFile": responses_file}
        assert done["metadata"]["inputConfig"] == {"fileName": uploaded["name"]}
        download = client.get(
            f"/download/v1beta/{responses_file}:download", params={"alt": "media"}
        )
    assert server.result_downloads[created["name"]] == 1
    result = {line["key"]: line for line in read_jsonl(download.content)}
    [part] = result["k1"]["response"]["candidates"][0]["content"]["parts"]
    assert part == {"functionCall": {"name": "emit", "args": {"n": 1}}}
    [part] = result["k7"]["response"]["candidates"][0]["content"]["parts"]
    assert part["functionCall"]["args"] == {"wrong": True}
    assert result["k13"]["error"]["code"] == 400
    assert server.answered == {("gemini", n): 1 for n in (1, 7, 13, 2)}


def test_an_expired_openai_and_gemini_job(server: ProviderBatchServer) -> None:
    server.expire_next = 2
    with openai_client(server) as client:
        batch = openai_batch(client, openai_lines([1, 2, 3, 4, 5]))
        expired = poll(client, f"/batches/{batch['id']}", 2)[-1]
        errors = read_jsonl(client.get(f"/files/{expired['error_file_id']}/content").content)
        output = read_jsonl(client.get(f"/files/{expired['output_file_id']}/content").content)
    assert expired["status"] == "expired" and expired["expired_at"] is not None
    assert expired["request_counts"] == {"total": 5, "completed": 2, "failed": 3}
    assert {line["custom_id"] for line in output} == {"row-1", "row-2"}
    assert {line["custom_id"] for line in errors} == {"row-3", "row-4", "row-5"}
    assert all(line["response"] is None for line in errors)
    assert all(line["error"]["code"] == "batch_expired" for line in errors)

    entries = [{"request": gemini_request(n), "metadata": {"key": f"k{n}"}} for n in (1, 2, 3)]
    body = {"batch": {"inputConfig": {"requests": {"requests": entries}}}}
    with gemini_client(server) as client:
        created = client.post("/v1beta/models/g:batchGenerateContent", json=body).json()
        done = poll(client, f"/v1beta/{created['name']}", 2)[-1]
    assert done["done"] is True and done["metadata"]["state"] == "BATCH_STATE_EXPIRED"
    rows = done["response"]["inlinedResponses"]["inlinedResponses"]
    assert [row["metadata"]["key"] for row in rows] == ["k1"]
    assert server.answered == {
        ("openai-chat", 1): 1,
        ("openai-chat", 2): 1,
        ("gemini", 1): 1,
    }
    assert server.expire_next == 0


def test_held_jobs_stay_in_progress_until_cancelled(server: ProviderBatchServer) -> None:
    server.hold = True
    with openai_client(server) as client:
        batch = openai_batch(client, openai_lines([1, 2]))
        held = poll(client, f"/batches/{batch['id']}", 4)
        cancelling = client.post(f"/batches/{batch['id']}/cancel").json()
        cancelled = client.get(f"/batches/{batch['id']}").json()
        errors = read_jsonl(client.get(f"/files/{cancelled['error_file_id']}/content").content)
        again = client.post(f"/batches/{batch['id']}/cancel")
    assert {state["status"] for state in held} == {"in_progress"}
    assert cancelling["status"] == "cancelling" and cancelling["cancelling_at"] is not None
    assert cancelled["status"] == "cancelled" and cancelled["output_file_id"] is None
    assert {line["error"]["code"] for line in errors} == {"batch_cancelled"}
    assert again.status_code == 400

    requests = [{"custom_id": "a", "params": claude(1)}]
    with anthropic_client(server) as client:
        created = client.post("/messages/batches", json={"requests": requests}).json()
        poll(client, f"/messages/batches/{created['id']}", 3)
        canceling = client.post(f"/messages/batches/{created['id']}/cancel").json()
        ended = client.get(f"/messages/batches/{created['id']}").json()
        results = read_jsonl(client.get(ended["results_url"]).content)
    assert canceling["processing_status"] == "canceling"
    assert canceling["cancel_initiated_at"] is not None
    assert ended["processing_status"] == "ended" and ended["request_counts"]["canceled"] == 1
    assert results == [{"custom_id": "a", "result": {"type": "canceled"}}]

    body = {"batch": {"inputConfig": {"requests": {"requests": [{"request": gemini_request(1)}]}}}}
    with gemini_client(server) as client:
        created = client.post("/v1beta/models/g:batchGenerateContent", json=body).json()
        running = poll(client, f"/v1beta/{created['name']}", 3)
        cancel = client.post(f"/v1beta/{created['name']}:cancel")
        done = client.get(f"/v1beta/{created['name']}").json()
    assert {state["metadata"]["state"] for state in running} == {"BATCH_STATE_RUNNING"}
    assert cancel.status_code == 200 and cancel.json() == {}
    assert done["done"] is True and done["metadata"]["state"] == "BATCH_STATE_CANCELLED"
    assert "response" not in done
    assert not server.answered


def test_the_list_endpoints_page_newest_first(server: ProviderBatchServer) -> None:
    with openai_client(server) as client:
        ids = [openai_batch(client, openai_lines([n]))["id"] for n in range(3)]
        page = client.get("/batches", params={"limit": 2}).json()
        rest = client.get("/batches", params={"limit": 2, "after": page["last_id"]}).json()
    assert page["object"] == "list" and page["has_more"] is True
    assert [batch["id"] for batch in page["data"]] == ids[::-1][:2]
    assert page["first_id"] == ids[2] and page["last_id"] == ids[1]
    assert [batch["id"] for batch in rest["data"]] == ids[:1] and rest["has_more"] is False

    with anthropic_client(server) as client:
        made = [
            client.post(
                "/messages/batches", json={"requests": [{"custom_id": "a", "params": claude(n)}]}
            ).json()["id"]
            for n in range(2)
        ]
        listed = client.get("/messages/batches", params={"limit": 1}).json()
    assert [batch["id"] for batch in listed["data"]] == made[1:] and listed["has_more"] is True

    body = {"batch": {"inputConfig": {"requests": {"requests": [{"request": gemini_request(1)}]}}}}
    with gemini_client(server) as client:
        names = [
            client.post("/v1beta/models/g:batchGenerateContent", json=body).json()["name"]
            for _ in range(2)
        ]
        first = client.get("/v1beta/batches", params={"pageSize": 1}).json()
        second = client.get(
            "/v1beta/batches", params={"pageSize": 1, "pageToken": first["nextPageToken"]}
        ).json()
    assert [op["name"] for op in first["operations"]] == names[1:]
    assert [op["name"] for op in second["operations"]] == names[:1]
    assert "nextPageToken" not in second
    assert len(server.jobs) == 7
    assert [job.provider for job in server.jobs] == ["openai"] * 3 + ["anthropic"] * 2 + [
        "gemini"
    ] * 2


def test_fail_all_rows_fails_every_row_of_a_job_that_succeeds(
    server: ProviderBatchServer,
) -> None:
    server.fail_all_rows = True
    with openai_client(server) as client:
        batch = openai_batch(client, openai_lines([1, 7]))
        done = poll(client, f"/batches/{batch['id']}", 2)[-1]
        errors = read_jsonl(client.get(f"/files/{done['error_file_id']}/content").content)
        live = client.post("/chat/completions", json=chat(7))
    assert done["status"] == "completed" and done["output_file_id"] is None
    assert done["request_counts"] == {"total": 2, "completed": 0, "failed": 2}
    assert {line["response"]["status_code"] for line in errors} == {500}
    assert live.json()["choices"][0]["message"]["content"] == '{"n": 7}'

    body = {"batch": {"inputConfig": {"requests": {"requests": [{"request": gemini_request(1)}]}}}}
    with gemini_client(server) as client:
        created = client.post("/v1beta/models/g:batchGenerateContent", json=body).json()
        done = poll(client, f"/v1beta/{created['name']}", 2)[-1]
    assert done["metadata"]["state"] == "BATCH_STATE_SUCCEEDED"
    [row] = done["response"]["inlinedResponses"]["inlinedResponses"]
    assert row == {"error": {"code": 500, "message": row["error"]["message"], "status": "INTERNAL"}}


def test_gemini_live(server: ProviderBatchServer) -> None:
    with gemini_client(server) as client:
        path = "/v1beta/models/gemini-x:generateContent"
        failing = client.post(path, json=gemini_request(23))
        answered = client.post(path, json=gemini_request(23))
        invalid = client.post(path, json=gemini_request(13))
    no_key = httpx2.post(
        f"{server.gemini_base}/models/g:generateContent", json=gemini_request(1), verify=False
    )
    assert failing.status_code == 500
    assert failing.json()["error"]["code"] == 500
    assert failing.json()["error"]["status"] == "INTERNAL"
    parts = answered.json()["candidates"][0]["content"]["parts"]
    assert parts == [{"text": '{"n": 23}'}]
    assert invalid.status_code == 400 and invalid.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert no_key.status_code == 403
    assert server.live == {("gemini", 23): 2, ("gemini", 13): 1}
