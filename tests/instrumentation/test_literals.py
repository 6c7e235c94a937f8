"""The literal registry (record 003): patterns, containment, user patterns, and that scanning only
the candidate tokens finds exactly what scanning the whole text finds."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_scans import reference_extract

from ctxwatch import LiteralRegistry, Message

PIECES = ["INV-20418", "deadbeef12", "3f2a9c1", "550e8400-e29b-41d4-a716-446655440000", "https://x.io/a/b.",
          "/etc/app/config.yaml", "src/app/main.py", "ERR_CONN_RESET", "E1234", "EACCES", "call_7f3a",
          "0.75", "123456", "`config_path`", "`a b`", "ledger", "The", "NASA", "(see", "x/y", "a:b", "-",
          "~/notes.md", "../up/one.txt", "toolu_01AbC", "v1.2.3", "Row", "12", "e.g.", ",", "\n", "\t",
          "EVERYONE", "ENOENT", "0xdeadbeef1", "C:\\Users\\bob\\file.txt", "D:\\x"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40), st.lists(st.sampled_from([" ", "", "\n", "  "]),
                                                                 min_size=40, max_size=40))
def test_candidate_scan_equals_the_whole_text_scan(pieces, seps):
    text = "".join(p + s for p, s in zip(pieces, seps, strict=False))
    assert LiteralRegistry().extract(text) == reference_extract(text)


def test_the_default_patterns_find_ids_paths_urls_and_codes():
    text = ("open /etc/app/config.yaml and src/app/main.py; id 550e8400-e29b-41d4-a716-446655440000 sha 3f2a9c1 "
            "at https://x.io/a/b. ERR_CONN_RESET E1234 ABC-1234 deadbeef12 call_7f3a threshold 0.75 "
            "`config_path` 123456 the 500 files")
    assert LiteralRegistry().extract(text) == {
        "/etc/app/config.yaml", "src/app/main.py", "550e8400-e29b-41d4-a716-446655440000", "3f2a9c1",
        "https://x.io/a/b", "ERR_CONN_RESET", "E1234", "ABC-1234", "deadbeef12", "call_7f3a", "0.75",
        "config_path", "123456"}


def test_literals_are_case_sensitive_and_cached_per_message_content():
    reg = LiteralRegistry()
    m = Message("user", "ticket ABC-1234 and abc-1234")
    assert reg.of(m) == {"ABC-1234"}
    assert reg.of(Message("user", "ticket ABC-1234 and abc-1234")) is reg.of(m)


def test_user_patterns_and_exact_literals():
    reg = LiteralRegistry(extra={"order": r"\bORD#\d{4}\b"}, literals=["Ada Park"])
    assert reg.extract("order ORD#0042 for Ada Park") == {"ORD#0042", "Ada Park"}
    reg.register("sku", r"\bSKU [A-Z]{3}\b")            # may span white space: scanned over the whole text
    assert "SKU QRX" in reg.extract("restock SKU QRX today")
    with pytest.raises(ValueError, match="literal pattern 'bad'"):
        reg.register("bad", "(unclosed")


def test_shouting_is_not_an_error_code_but_errno_names_hex_and_windows_paths_are_literals():
    text = r"Error EVERYONE must READ the EXAMPLE; got ENOENT at 0xdeadbeef1 in C:\Users\bob\file.txt"
    assert LiteralRegistry().extract(text) == {"ENOENT", "0xdeadbeef1", r"C:\Users\bob\file.txt"}


def test_a_literal_nested_in_a_path_is_a_literal_of_its_own():
    uuid = "550e8400-e29b-41d4-a716-446655440000"
    found = LiteralRegistry().extract(f"wrote /var/runs/{uuid}/out.json and ticket OPS-4411")
    assert {f"/var/runs/{uuid}/out.json", uuid, "OPS-4411"} <= found
    assert "550e8400" not in found  # a UUID's groups are not hashes of their own


def test_white_space_and_punctuation_are_never_literals():
    found = LiteralRegistry().extract("use ` ` then ` → ` and `/` or n /a; keep `config_path`")
    assert found == {"config_path"}


def test_downstream_literals_leave_out_tool_output_but_keep_the_call_arguments():
    from ctxwatch.model import ToolCall, ToolResult
    reg = LiteralRegistry()
    call = Message("assistant", [ToolCall("call_1", "read", '{"path": "/srv/app/main.py"}')])
    result = Message("tool", [ToolResult("call_1", "deadbeef12 at /srv/app/main.py line 3")])
    assert "/srv/app/main.py" in reg.downstream(call)
    assert reg.downstream(result) == frozenset() and "deadbeef12" in reg.of(result)


def test_tool_arguments_are_read_as_json_values_not_as_escaped_text():
    """A literal glued to a JSON escape is still found; a URL is not taken with an escape's backslash."""
    from ctxwatch.model import ToolCall
    args = json.dumps({"command": "cat /srv/app/main.py\ncurl https://api.example.com", "note": 'see "OPS-4411"'})
    found = LiteralRegistry().of(Message("assistant", [ToolCall("call_1", "bash", args)]))
    assert {"/srv/app/main.py", "https://api.example.com", "OPS-4411"} <= found
    assert not any(lit.endswith("\\") or lit.endswith("\\n") for lit in found), found
    free_form = LiteralRegistry().of(Message("assistant", [ToolCall("call_2", "apply_patch", "*** /srv/x.py")]))
    assert "/srv/x.py" in free_form
