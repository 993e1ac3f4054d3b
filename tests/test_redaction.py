"""repro.redaction: credentials inside URL-shaped values become `***` wherever repro writes or
prints them; credential-free text and data come back as they went in; the config hash is the
hash of the config as recorded; a redacted URI read back from the ledger gets its real value
where the process knows it."""

from __future__ import annotations

import json

import pytest

from repro import redaction
from repro.config.spec import config_hash
from repro.ledger import Ledger
from repro.worker import envcapture


@pytest.mark.parametrize("text, redacted", [
    ("tracking.uri=http://bob:PASS@host:5999", "tracking.uri=http://***@host:5999"),
    ("https://ghp_tok123@github.com/a/b.git", "https://***@github.com/a/b.git"),
    ("postgresql+psycopg2://u:p%40ss@db:5432/mlflow", "postgresql+psycopg2://***@db:5432/mlflow"),
    ("https://h/simple?token=abc&page=2", "https://h/simple?token=***&page=2"),
    ("s3://b/k?X-Amz-Credential=AK%2F1&X-Amz-Signature=dead&X-Amz-Expires=60",
     "s3://b/k?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Expires=60"),
    ("https://acct.blob.core.windows.net/c?sv=2020&sig=Zm9v", "https://acct.blob.core.windows.net/c?sv=2020&sig=***"),
    ("https://h/cb#access_token=xyz&state=1", "https://h/cb#access_token=***&state=1"),
    ("https://h/x?password=hunter2&key=k1&api_key=k2", "https://h/x?password=***&key=***&api_key=***"),
    ("HTTPS_PROXY=proxyuser:PW@proxy:3128", "HTTPS_PROXY=***@proxy:3128"),
    ("error: API request to http://u:p@127.0.0.1:1/api/2.0 failed", "error: API request to http://***@127.0.0.1:1/api/2.0 failed"),
])
def test_credentials_in_urls_are_masked(text, redacted):
    assert redaction.redact(text, environ={}) == redacted
    assert envcapture.redact(text, environ={}) == redacted  # the run path's name for it, the same function


@pytest.mark.parametrize("text", [
    "sqlite:////tmp/ledger/mlflow.db", "git@github.com:org/repo.git", "bob@example.com", "file:///data/x.csv",
    "https://pypi.org/simple?page=2", "model.preset=tiny run.steps=6", "× best ⚠ busy", "",
])
def test_text_without_credentials_is_left_as_it_is(text):
    assert redaction.redact(text, environ={}) == text


def test_the_values_of_secret_named_variables_are_masked_not_short_ones():
    env = {"HF_TOKEN": "hf_abcdefgh", "SOME_AUTH_ENABLED": "1", "PATH": "/usr/bin"}
    assert redaction.redact("got hf_abcdefgh and 1 in /usr/bin", environ=env) == "got *** and 1 in /usr/bin"


def test_data_is_walked_keys_and_all_and_credential_free_data_is_equal():
    data = {"a": ["http://u:p@h/x", 3, None, 1.5], "http://k:v@h": {"b": ("x", "https://h?sig=1")}}
    assert redaction.redact_data(data, environ={}) == {"a": ["http://***@h/x", 3, None, 1.5],
                                                       "http://***@h": {"b": ("x", "https://h?sig=***")}}
    clean = {"run": {"steps": 6}, "tracking": {"uri": "sqlite:////x.db"}, "tags": ["a", "b"]}
    assert redaction.redact_data(clean, environ={}) == clean


def test_the_config_hash_is_the_hash_of_the_config_as_recorded():
    config = {"run": {"steps": 6}, "env": {"packages": ["mypkg @ git+https://tok@github.com/o/mypkg"]},
              "tracking": {"uri": "http://bob:PASS@host"}}
    recorded = redaction.redact_data(config)
    assert config_hash(config) == config_hash(recorded)  # what a replay recomputes from the record
    other_password = json.loads(json.dumps(config).replace("tok@", "other@"))
    assert config_hash(other_password) == config_hash(config)  # a credential is not a run's identity
    clean = {"run": {"steps": 6}, "env": {"packages": ["mypkg==1.0"]}}
    from repro.hashing import sha256_json
    from repro.config.spec import semantic

    assert config_hash(clean) == sha256_json(semantic(clean))  # credential-free configs keep their hash


def test_the_ledger_records_credentials_masked_and_verifies(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    rec = ledger.append({"kind": "run", "status": "ok", "config": {"tracking": {"uri": "http://bob:PASS@host:5999"}},
                         "overrides": ["tracking.uri=http://bob:PASS@host:5999"],
                         "mlflow": {"tracking_uri": "http://bob:PASS@host:5999"}})
    assert "PASS" not in json.dumps(rec)
    assert b"PASS" not in next((tmp_path / "ledger").rglob("*.json")).read_bytes()
    assert ledger.verify() == []
    assert ledger.get(rec["id"])["config"]["tracking"]["uri"] == "http://***@host:5999"


def test_a_redacted_uri_gets_its_real_value_back_where_it_is_known(monkeypatch):
    monkeypatch.delenv(redaction.REAL_URIS_VAR, raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    real = "http://alice:S3CRET@mlflow.internal:5000"
    shown = redaction.redact(real)
    assert shown == "http://***@mlflow.internal:5000" and redaction.restore(shown) == real  # this process redacted it
    redaction._seen.clear()
    assert redaction.restore(shown) == "http://mlflow.internal:5000"  # unknown: MLflow's own credentials apply
    monkeypatch.setenv("MLFLOW_TRACKING_URI", real)
    assert redaction.restore(shown) == real
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.setenv(redaction.REAL_URIS_VAR, json.dumps(["http://x:y@other:1", real]))  # a parent handed it over
    assert redaction.restore(shown) == real
    assert redaction.restore("sqlite:////x.db") == "sqlite:////x.db"


def test_the_projector_is_handed_the_real_uris_this_process_redacted(monkeypatch):
    from repro.tracking import handoff

    monkeypatch.delenv(redaction.REAL_URIS_VAR, raising=False)
    redaction.redact("http://carol:PW123456@store:5000")
    handed = json.loads(handoff._projector_env()[redaction.REAL_URIS_VAR])
    assert "http://carol:PW123456@store:5000" in handed
