"""apimachinery's name formats (`validation.names`): what each accepts, and upstream's
wording of what it refuses."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from drasim.common.api.validation import names

NAME_FORMAT_CASES = [
    (names.is_dns1123_label, "my-name", True),
    (names.is_dns1123_label, "123-abc", True),
    (names.is_dns1123_label, "a" * 63, True),
    (names.is_dns1123_label, "a" * 64, False),
    (names.is_dns1123_label, "my.name", False),
    (names.is_dns1123_label, "-a", False),
    (names.is_dns1123_label, "", False),
    (names.is_dns1123_subdomain, "example.com", True),
    (names.is_dns1123_subdomain, "Example.com", False),
    (names.is_dns1123_subdomain, "a." * 126 + "a", True),
    (names.is_dns1123_subdomain, "a" * 254, False),
    (names.is_qualified_name, "MyName", True),
    (names.is_qualified_name, "example.com/My_Name.1", True),
    (names.is_qualified_name, "/name", False),
    (names.is_qualified_name, "example.com/", False),
    (names.is_qualified_name, "a/b/c", False),
    (names.is_qualified_name, "x" * 64, False),
    (names.is_valid_label_value, "", True),
    (names.is_valid_label_value, "my_value-1.2", True),
    (names.is_valid_label_value, "-x", False),
    (names.is_c_identifier, "_my_name1", True),
    (names.is_c_identifier, "1name", False),
]


@pytest.mark.parametrize(
    ("check", "value", "valid"),
    NAME_FORMAT_CASES,
    ids=[f"{c[0].__name__}-{c[1][:20]!r}" for c in NAME_FORMAT_CASES],
)
def test_name_formats(check: Callable[[str], list[str]], value: str, valid: bool) -> None:
    assert (check(value) == []) is valid


def test_name_format_messages_match_upstream() -> None:
    assert names.is_dns1123_label("A") == [
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    ]
    assert names.is_qualified_name("example.com/" + "x" * 64) == [
        "name part must be no more than 63 characters"
    ]
