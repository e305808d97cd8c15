"""Which header names hold a credential: every real credential header is taken for one
(its value never shown in a repr, and cut out of what a provider echoes), a passphrase's
(`X-Passphrase`, `CB-ACCESS-PASSPHRASE`), a password's short names (`X-Pwd`, `X-Pass`), a
passcode and Honeycomb's key (`X-Honeycomb-Team`) among them; and a name that only looks
like one (a count of tokens, a tokenizer's version, an author, a cache key, a key's id, a
monkey) is not, so its value stays readable."""

from __future__ import annotations

import pytest

from _recording import provider
from allama.adapters._http import HttpRequest, is_secret_header
from allama.errors import Error
from allama.types import ChatRequest

CREDENTIAL_HEADERS = (
    "Authorization",
    "Proxy-Authorization",
    "X-Api-Key",
    "Api-Key",
    "X-Goog-Api-Key",
    "Ocp-Apim-Subscription-Key",
    "X-Auth-Token",
    "X-Auth-Key",
    "X-Access-Token",
    "X-AccessToken",
    "X-AppKey",
    "X-ClientSecret",
    "X-Client-Secret",
    "Cookie",
    "Set-Cookie",
    "Set-Cookie2",
    "X-Amz-Security-Token",
    "X-Passphrase",
    "CB-ACCESS-PASSPHRASE",
    "CB-ACCESS-KEY",
    "CB-ACCESS-SIGN",
    "KC-API-PASSPHRASE",
    "KC-API-SIGN",
    "OK-ACCESS-PASSPHRASE",
    "X-BAPI-SIGN",
    "X-MBX-APIKEY",
    "X-Signature",
    "X-Hub-Signature",
    "X-Hub-Signature-256",
    "Stripe-Signature",
    "X-Slack-Signature",
    "X-Session-Token",
    "X-CSRF-Token",
    "X-XSRF-TOKEN",
    "X-CSRFToken",
    "cf-aig-authorization",
    "Cf-Access-Jwt-Assertion",
    "Cf-Access-Client-Secret",
    "X-JWT-Assertion",
    "X-Portkey-Api-Key",
    "x-portkey-virtual-key",
    "Helicone-Auth",
    "X-OAuth",
    "X-Pwd",
    "X-Passcode",
    "X-OTP",
    "X-Honeycomb-Team",
    "X-Userpwd",
    "X-Pass",
    "X-Db-Pass",
    "X-Password",
    "X-Api-Password",
    "Private-Token",
    "X-Gitlab-Token",
    "X-Vault-Token",
    "X-Secret",
    "X-Webhook-Secret",
    "X-Api-Keys",
    "X-Authorisation",
    "Token",
)

NOT_CREDENTIAL_HEADERS = (
    "X-Honeycomb-Dataset",
    "X-Team",
    "X-Copter",
    "x-token-count",
    "x-tokenizer",
    "X-Tokenizer-Version",
    "x-author",
    "X-Authority",
    "x-cookie-consent",
    "x-cache-key",
    "cf-aig-cache-key",
    "Idempotency-Key",
    "x-idempotency-key",
    "x-key-id",
    "X-API-KEY-ID",
    "x-monkey",
    "x-hockey",
    "X-Keyboard-Layout",
    "x-bypass-cache",
    "x-passthrough",
    "X-Pass-Through",
    "X-Design",
    "Content-Type",
    "Accept",
    "User-Agent",
    "X-Request-Id",
    "x-trace-id",
    "x-session-id",
    "Helicone-Session-Name",
    "Cf-Access-Client-Id",
    "OpenAI-Organization",
    "OpenAI-Project",
    "anthropic-version",
    "anthropic-beta",
    "x-stainless-lang",
    "x-stainless-package-version",
    "x-stainless-os",
    "x-stainless-arch",
    "x-stainless-runtime",
    "x-stainless-runtime-version",
    "x-stainless-retry-count",
    "x-stainless-timeout",
    "x-portkey-provider",
    "X-Ratelimit-Remaining-Tokens",
    "x-ratelimit-limit-tokens",
    "anthropic-ratelimit-tokens-remaining",
    "x-max-tokens",
    "x-maxtokens",
)

SECRET = "s3cr3t-Passphrase-Value-123"


@pytest.mark.parametrize("name", CREDENTIAL_HEADERS)
def test_a_credential_header_is_secret(name: str) -> None:
    assert is_secret_header(name) is True
    assert is_secret_header(name.upper()) is True
    assert is_secret_header(name.lower()) is True


@pytest.mark.parametrize("name", NOT_CREDENTIAL_HEADERS)
def test_a_header_that_only_looks_like_a_credential_is_not_secret(name: str) -> None:
    assert is_secret_header(name) is False
    assert is_secret_header(name.upper()) is False


@pytest.mark.parametrize("name", ["X-Passphrase", "CB-ACCESS-PASSPHRASE", "X-Pass", "X-Pwd"])
def test_a_passphrase_header_is_redacted_in_the_repr_and_in_an_echoed_error(name: str) -> None:
    shown = repr(HttpRequest("POST", "https://x.example", {name: SECRET, "X-Key-Id": "k-7"}, {}))
    assert SECRET not in shown
    assert f"'{name}': '<redacted>'" in shown
    assert "'X-Key-Id': 'k-7'" in shown
    echoed = {"error": {"message": f"bad header {name}: {SECRET}", "type": "invalid_request"}}
    made, _ = provider("openai", (400, echoed), headers={name: SECRET})
    with pytest.raises(Error) as caught:
        made.chat(ChatRequest("gpt-4o").user("hi"))
    assert str(caught.value) == f"bad header {name}: <redacted>"
    made.close()


def test_a_header_that_only_looks_like_a_credential_shows_its_value() -> None:
    headers = {
        "x-tokenizer": "o200k_base-v2",
        "x-cookie-consent": "accepted-all",
        "x-cache-key": "answer-cache-7",
        "X-API-KEY-ID": "key-id-123456",
        "X-Passphrase": SECRET,
    }
    shown = repr(HttpRequest("POST", "https://x.example", headers, {}))
    assert shown == (
        "HttpRequest(method='POST', url='https://x.example', headers={"
        "'x-tokenizer': 'o200k_base-v2', 'x-cookie-consent': 'accepted-all', "
        "'x-cache-key': 'answer-cache-7', 'X-API-KEY-ID': 'key-id-123456', "
        "'X-Passphrase': '<redacted>'}, body_keys=[])"
    )
