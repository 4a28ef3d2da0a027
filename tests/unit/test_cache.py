"""The content cache: keys, and reads that a rerun makes by the thousand."""

from __future__ import annotations

import json

from simhub.cache import ContentCache, fingerprint, fingerprint_of_json


def test_a_key_from_json_parts_is_the_key_of_the_list():
    dialogue = json.dumps({"id": "d-1", "turns": [{"role": "tutor", "content": "Qu'est-ce que \"½\" ?\n\t\u00e9\u4e2d"}]},
                          ensure_ascii=False)
    for parts in (["abc", 3, "a \"quoted\" candidate\nwith é and \u2028", dialogue], ["", 0, "", ""]):
        encoded = [json.dumps(p, ensure_ascii=False) for p in parts]
        assert fingerprint_of_json(encoded) == fingerprint(parts)


def test_get_reads_what_put_wrote_and_counts_hits_and_misses(tmp_path):
    cache = ContentCache(tmp_path, "scores")
    key = fingerprint(["x"])
    assert cache.get(key) is None and cache.misses == 1
    cache.put(key, {"values": {"acts": 1.0}, "text": "é"})
    assert cache.get(key) == {"values": {"acts": 1.0}, "text": "é"} and cache.hits == 1
    (tmp_path / "scores" / key[:2] / f"{key}.json").write_bytes(b'{"torn')  # a torn write is a miss
    assert cache.get(key) is None and cache.misses == 2
    off = ContentCache(None, "scores")
    off.put(key, 1)
    assert off.get(key) is None and not off.enabled
