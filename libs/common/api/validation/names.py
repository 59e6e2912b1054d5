"""apimachinery's name formats (`k8s.io/apimachinery/pkg/util/validation`): DNS labels and
subdomains, qualified names, label values and C identifiers.

Each check returns the reasons a value fails (empty when it is fine), worded as upstream's
so that `kubectl` users read the same text.
"""

from __future__ import annotations

import re

from drasim.common.api.validation import memo

__all__ = [
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "LABEL_VALUE_MAX_LENGTH",
    "QUALIFIED_NAME_MAX_LENGTH",
    "is_c_identifier",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_label_value",
]

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_C_IDENTIFIER_FMT = "[A-Za-z_][A-Za-z0-9_]*"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_C_IDENTIFIER_RE = re.compile(_C_IDENTIFIER_FMT)

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
QUALIFIED_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _length_and_format_errors(
    value: str, max_length: int, pattern: re.Pattern[str], format_error: str
) -> list[str]:
    """Upstream's `MaxLenError` then `RegexError`: the two reasons every bounded name
    format (DNS label, DNS subdomain, label value) gives, in that order."""
    errs = []
    if len(value) > max_length:
        errs.append(_max_len_error(max_length))
    if not pattern.fullmatch(value):
        errs.append(format_error)
    return errs


_DNS1123_LABEL_ERR = _regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
    "or '-', and must start and end with an alphanumeric character",
    _DNS1123_LABEL_FMT,
    "my-name",
    "123-abc",
)


_DNS1123_SUBDOMAIN_ERR = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
    "characters, '-' or '.', and must start and end with an alphanumeric character",
    _DNS1123_SUBDOMAIN_FMT,
    "example.com",
)


_QUALIFIED_NAME_ERR = _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character",
    _QUALIFIED_NAME_FMT,
    "MyName",
    "my.name",
    "123-abc",
)


_LABEL_VALUE_ERR = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, "
    "'-', '_' or '.', and must start and end with an alphanumeric character",
    _LABEL_VALUE_FMT,
    "MyValue",
    "my_value",
    "12345",
)


@memo.strings
def is_dns1123_label(value: str) -> list[str]:
    """RFC 1123 label: lowercase alphanumerics and '-', at most 63 characters."""
    return _length_and_format_errors(
        value, DNS1123_LABEL_MAX_LENGTH, _DNS1123_LABEL_RE, _DNS1123_LABEL_ERR
    )


_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_RE = re.compile(_DNS1035_LABEL_FMT)
_DNS1035_LABEL_ERR = _regex_error(
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character",
    _DNS1035_LABEL_FMT,
    "my-name",
    "abc-123",
)


@memo.strings
def is_dns1035_label(value: str) -> list[str]:
    """RFC 1035 label: as an RFC 1123 label, but starting with a letter."""
    return _length_and_format_errors(
        value, DNS1123_LABEL_MAX_LENGTH, _DNS1035_LABEL_RE, _DNS1035_LABEL_ERR
    )


@memo.strings
def is_dns1123_subdomain(value: str) -> list[str]:
    """RFC 1123 subdomain: dot-separated labels, at most 253 characters."""
    return _length_and_format_errors(
        value, DNS1123_SUBDOMAIN_MAX_LENGTH, _DNS1123_SUBDOMAIN_RE, _DNS1123_SUBDOMAIN_ERR
    )


@memo.strings
def is_qualified_name(value: str) -> list[str]:
    """`[prefix/]name`: prefix a DNS subdomain, name at most 63 characters (label keys)."""
    errs = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += [f"prefix part {msg}" for msg in is_dns1123_subdomain(prefix)]
    else:
        return [
            f"a qualified name {_QUALIFIED_NAME_ERR} with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX_LENGTH:
        errs.append(f"name part {_max_len_error(QUALIFIED_NAME_MAX_LENGTH)}")
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append(f"name part {_QUALIFIED_NAME_ERR}")
    return errs


@memo.strings
def is_valid_label_value(value: str) -> list[str]:
    return _length_and_format_errors(
        value, LABEL_VALUE_MAX_LENGTH, _LABEL_VALUE_RE, _LABEL_VALUE_ERR
    )


def is_c_identifier(value: str) -> list[str]:
    if _C_IDENTIFIER_RE.fullmatch(value):
        return []
    return [
        _regex_error(
            "a valid C identifier must start with alphabetic character or '_', "
            "followed by a string of alphanumeric characters or '_'",
            _C_IDENTIFIER_FMT,
            "my_name",
            "MY_NAME",
            "MyName",
        )
    ]
