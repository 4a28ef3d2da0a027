"""The local Hub server, exercised through huggingface_hub, transformers and peft's own upload/download code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import huggingface_hub.constants
import pytest
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    HfApi,
    get_hf_file_metadata,
    hf_hub_download,
    hf_hub_url,
    snapshot_download,
)
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoFile, RepoFolder
from huggingface_hub.utils import get_session
from huggingface_hub.utils.sha import git_hash

from simhub.demo.tiny import TINY_LLAMA
from tests.conftest import LOCAL_HUB_TOKEN as TOKEN  # the token the `local_hub` fixture puts in HF_TOKEN
from tests.doubles.hub_server import LocalHub

SHA_RE = re.compile(r"[0-9a-f]{40}")


def _write_tree(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


# -- (a) plain huggingface_hub round trip -------------------------------------------------------------------------


def test_upload_folder_list_and_download(hub_api: HfApi, tmp_path: Path) -> None:
    repo_id = hub_api.create_repo("org/files").repo_id
    files = {
        "a.txt": b"hello\n",
        "sub/b.json": b'{"x": 1}',
        "sub/deep/c.bin": bytes(range(256)) * 40,
        "empty.txt": b"",
        "notes/caf\u00e9 menu.txt": "d\u00e9j\u00e0 vu".encode(),
    }
    _write_tree(tmp_path / "folder", files)

    commit = hub_api.upload_folder(
        repo_id=repo_id, folder_path=tmp_path / "folder", commit_message="add files"
    )

    assert SHA_RE.fullmatch(commit.oid)
    assert hub_api.model_info(repo_id).sha == commit.oid
    # Like the real Hub, a new repo starts with an initial commit holding .gitattributes.
    assert sorted(hub_api.list_repo_files(repo_id)) == sorted([".gitattributes", *files])
    tree = {entry.path: entry for entry in hub_api.list_repo_tree(repo_id, recursive=True)}
    assert isinstance(tree["sub"], RepoFolder) and isinstance(tree["sub/deep"], RepoFolder)
    assert isinstance(tree["sub/deep/c.bin"], RepoFile)
    assert tree["sub/deep/c.bin"].size == len(files["sub/deep/c.bin"])
    assert tree["a.txt"].blob_id == git_hash(files["a.txt"])
    assert [e.path for e in hub_api.list_repo_tree(repo_id, path_in_repo="sub")] == ["sub/deep", "sub/b.json"]

    for name, data in files.items():
        path = Path(hf_hub_download(repo_id, name, cache_dir=tmp_path / "cache"))
        assert path.read_bytes() == data
        assert path.parent.parts[-1 - name.count("/")] == commit.oid  # .../snapshots/<commit sha>/<name>

    metadata = get_hf_file_metadata(hf_hub_url(repo_id, "sub/b.json"))
    assert (metadata.commit_hash, metadata.etag, metadata.size) == (commit.oid, git_hash(b'{"x": 1}'), 8)
    ranged = get_session().get(hf_hub_url(repo_id, "a.txt"), headers={"Range": "bytes=2-"})
    assert (ranged.status_code, ranged.content) == (206, b"llo\n")

    # Re-uploading identical content is detected client-side from the preupload oids: no new commit.
    assert hub_api.upload_folder(repo_id=repo_id, folder_path=tmp_path / "folder").oid == commit.oid


def test_dataset_repo_commit_operations_and_snapshot(hub_api: HfApi, tmp_path: Path) -> None:
    repo_id = hub_api.create_repo("org/dialogues", repo_type="dataset").repo_id
    hub_api.upload_file(
        path_or_fileobj=b'{"turn": 1}\n', path_in_repo="data/old.jsonl", repo_id=repo_id, repo_type="dataset"
    )
    commit = hub_api.create_commit(
        repo_id,
        [
            CommitOperationAdd("data/train.jsonl", b'{"turn": 2}\n'),
            CommitOperationAdd("README.md", b"---\nlicense: mit\n---\n# Dialogues\n"),
            CommitOperationDelete("data/old.jsonl"),
        ],
        commit_message="replace split",
        repo_type="dataset",
    )

    folder = Path(snapshot_download(repo_id, repo_type="dataset", cache_dir=tmp_path))
    assert folder.name == commit.oid
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        ".gitattributes",
        "README.md",
        "data/train.jsonl",
    ]
    assert (folder / "data/train.jsonl").read_bytes() == b'{"turn": 2}\n'
    assert hub_api.dataset_info(repo_id).sha == commit.oid
    with pytest.raises(RepositoryNotFoundError):  # same id, wrong repo type
        hub_api.model_info(repo_id)


# -- (b) transformers -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_llama(local_hub: LocalHub):
    """A tiny random Llama pushed to org/tiny with transformers' own push_to_hub."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")

    torch.manual_seed(0)
    config = transformers.LlamaConfig(**TINY_LLAMA, vocab_size=300)
    model = transformers.LlamaForCausalLM(config).eval()
    commit = model.push_to_hub("org/tiny", token=TOKEN, commit_message="tiny llama")
    return model, commit


def _assert_same_weights(expected, actual) -> None:
    import torch

    want, got = expected.state_dict(), actual.state_dict()
    assert want.keys() == got.keys()
    for name, tensor in want.items():
        assert torch.equal(tensor, got[name]), name


def test_transformers_push_to_hub_and_from_pretrained(local_hub: LocalHub, tiny_llama, monkeypatch) -> None:
    from transformers import AutoModelForCausalLM

    model, commit = tiny_llama
    assert {"config.json", "model.safetensors", "README.md"} <= set(HfApi().list_repo_files("org/tiny"))

    loaded = AutoModelForCausalLM.from_pretrained("org/tiny")
    _assert_same_weights(model, loaded)
    assert HfApi().model_info("org/tiny").config["model_type"] == "llama"
    assert HfApi().model_info("org/tiny").sha == commit.oid

    # Offline: huggingface_hub reads HF_HUB_OFFLINE into a constant at import (transformers asks it through
    # `huggingface_hub.is_offline_mode()`); peft reads the environment variable directly.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    served_before = len(local_hub.requests)
    offline = AutoModelForCausalLM.from_pretrained("org/tiny")
    _assert_same_weights(model, offline)
    assert local_hub.requests[served_before:] == []
    with pytest.raises(OSError):
        AutoModelForCausalLM.from_pretrained("org/never-pushed")
    assert local_hub.requests[served_before:] == []


# -- (c) peft -------------------------------------------------------------------------------------------------------


def test_peft_lora_adapter_push_and_load(local_hub: LocalHub, tiny_llama) -> None:
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained("org/tiny")
    # Random B matrices (init_lora_weights=False), so that equal weights mean the adapter really round-tripped.
    lora_config = peft.LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False
    )
    adapted = peft.get_peft_model(base, lora_config)
    adapted.push_to_hub("org/tiny-lora", token=TOKEN)
    assert {"adapter_config.json", "adapter_model.safetensors"} <= set(
        HfApi().list_repo_files("org/tiny-lora")
    )

    loaded = peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained("org/tiny"), "org/tiny-lora")

    want = peft.get_peft_model_state_dict(adapted)
    got = peft.get_peft_model_state_dict(loaded)
    assert len(want) == 3 * 2 * 2  # layers x (q_proj, v_proj) x (lora_A, lora_B)
    assert want.keys() == got.keys()
    for name, tensor in want.items():
        assert torch.equal(tensor, got[name]), name
    assert loaded.peft_config["default"].r == 4
    assert set(loaded.peft_config["default"].target_modules) == {"q_proj", "v_proj"}


# -- (d) errors, revisions, auth ------------------------------------------------------------------------------------


def test_missing_repo_file_and_revision_raise_hub_errors(hub_api: HfApi, tmp_path: Path) -> None:
    with pytest.raises(RepositoryNotFoundError):
        hub_api.model_info("org/does-not-exist")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("org/does-not-exist", "config.json", cache_dir=tmp_path)

    repo_id = hub_api.create_repo("org/errors").repo_id
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(repo_id, "missing.txt", cache_dir=tmp_path)
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(repo_id, ".gitattributes", revision="no-such-branch", cache_dir=tmp_path)
    with pytest.raises(RevisionNotFoundError):
        hub_api.model_info(repo_id, revision="0" * 40)
    assert hub_api.repo_exists(repo_id) and not hub_api.repo_exists("org/does-not-exist")
    assert not hub_api.file_exists(repo_id, "missing.txt")
    with pytest.raises(HfHubHTTPError) as conflict:
        hub_api.create_repo(repo_id)
    assert conflict.value.response.status_code == 409
    assert hub_api.create_repo(repo_id, exist_ok=True).repo_id == repo_id


def test_pinned_revision_keeps_old_content(hub_api: HfApi, tmp_path: Path) -> None:
    repo_id = hub_api.create_repo("org/versions").repo_id
    v1 = hub_api.upload_file(path_or_fileobj=b"v1", path_in_repo="weights.txt", repo_id=repo_id)
    hub_api.create_tag(repo_id, tag="v1.0", revision=v1.oid)
    v2 = hub_api.upload_file(path_or_fileobj=b"v2", path_in_repo="weights.txt", repo_id=repo_id)
    assert v1.oid != v2.oid

    def read(revision: str | None) -> bytes:
        return Path(
            hf_hub_download(repo_id, "weights.txt", revision=revision, cache_dir=tmp_path)
        ).read_bytes()

    assert read(v1.oid) == b"v1"
    assert read("v1.0") == b"v1"
    assert read(None) == b"v2"
    assert hub_api.model_info(repo_id, revision=v1.oid[:7]).sha == v1.oid
    assert [c.commit_id for c in hub_api.list_repo_commits(repo_id)][:2] == [v2.oid, v1.oid]

    # Branches and pull requests are separate refs; main is untouched by both.
    hub_api.create_branch(repo_id, branch="exp", revision=v1.oid)
    hub_api.upload_file(path_or_fileobj=b"exp", path_in_repo="weights.txt", repo_id=repo_id, revision="exp")
    pr = hub_api.upload_file(
        path_or_fileobj=b"pr", path_in_repo="weights.txt", repo_id=repo_id, create_pr=True
    )
    assert pr.pr_revision == "refs/pr/1"
    assert (read("exp"), read("refs/pr/1"), read("main")) == (b"exp", b"pr", b"v2")


def test_private_repo_needs_a_token(hub_api: HfApi, tmp_path: Path) -> None:
    repo_id = hub_api.create_repo("org/secret", private=True).repo_id
    hub_api.upload_file(path_or_fileobj=b"top secret", path_in_repo="secret.txt", repo_id=repo_id)
    anonymous = HfApi(endpoint=hub_api.endpoint, token=False)

    with pytest.raises(RepositoryNotFoundError):
        anonymous.model_info(repo_id)
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download(repo_id, "secret.txt", token=False, cache_dir=tmp_path / "anonymous")
    with pytest.raises(HfHubHTTPError) as denied:
        anonymous.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=repo_id)
    assert denied.value.response.status_code == 401

    assert hub_api.model_info(repo_id).private is True
    path = hf_hub_download(repo_id, "secret.txt", token=TOKEN, cache_dir=tmp_path / "authenticated")
    assert Path(path).read_bytes() == b"top secret"


def test_token_allowlist(tmp_path: Path) -> None:
    with LocalHub(tmp_path / "hub", tokens={"good-token"}) as hub:
        good = HfApi(endpoint=hub.url, token="good-token")
        bad = HfApi(endpoint=hub.url, token="bad-token")
        with pytest.raises(HfHubHTTPError) as rejected:
            bad.create_repo("org/guarded")
        assert rejected.value.response.status_code == 401

        good.create_repo("org/guarded")
        good.upload_file(path_or_fileobj=b"ok", path_in_repo="ok.txt", repo_id="org/guarded")
        # Public repos are readable anonymously, but a wrong token is refused, as on the real Hub.
        assert HfApi(endpoint=hub.url, token=False).list_repo_files("org/guarded") == [
            ".gitattributes",
            "ok.txt",
        ]
        with pytest.raises(HfHubHTTPError):
            bad.list_repo_files("org/guarded")


def test_standalone_cli(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.doubles.hub_server", "--root", str(tmp_path), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        match = re.search(r"http://[0-9.]+:\d+", proc.stdout.readline())
        assert match is not None
        api = HfApi(endpoint=match[0], token="any")
        api.create_repo("org/cli")
        assert api.list_repo_files("org/cli") == [".gitattributes"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert (tmp_path / "models/org/cli/meta.json").is_file()
