"""The module paths from before ``mcp_server.expose`` still import, each warning with the path it moved to,
and give the same objects as the new paths."""

from __future__ import annotations

import importlib
import sys

import pytest

MOVED = [
    ("mcp_server.models_as_tools", "mcp_server.expose.models", ["DEFAULT_PERMISSION", "expose_model"]),
    (
        "mcp_server.models_as_writes",
        "mcp_server.expose.writes",
        ["RowWriter", "register_writes"],
    ),
    ("mcp_server.forms_as_tools", "mcp_server.expose.forms", ["expose_form", "form_errors_message"]),
    ("mcp_server.viewsets", "mcp_server.expose.viewsets", ["DEFAULT_ANNOTATIONS", "expose_viewset"]),
    ("mcp_server.viewsets.errors", "mcp_server.expose.viewsets.errors", ["field_errors", "refusal_message"]),
    ("mcp_server.viewsets.requests", "mcp_server.expose.viewsets.requests", ["build_request"]),
    ("mcp_server.viewsets.routes", "mcp_server.expose.viewsets.routes", ["Route", "routes_of"]),
    ("mcp_server.viewsets.schema", "mcp_server.expose.viewsets.schema", ["input_schema", "to_json_schema"]),
    ("mcp_server.viewsets.tools", "mcp_server.expose.viewsets.tools", ["expose_viewset"]),
]


@pytest.mark.parametrize(("old", "new", "names"), MOVED, ids=[old for old, _new, _names in MOVED])
def test_an_old_path_warns_with_the_new_one_and_gives_the_same_objects(
    old: str, new: str, names: list[str]
) -> None:
    sys.modules.pop(old, None)  # imported by an earlier test: the warning is given on import
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import from {new}$"):
        shim = importlib.import_module(old)
    moved = importlib.import_module(new)
    for name in names:
        assert getattr(shim, name) is getattr(moved, name), name
    assert set(shim.__all__) <= set(moved.__all__)


def test_the_package_names_are_those_of_mcp_server() -> None:
    import mcp_server
    import mcp_server.expose

    for name in ("expose_model", "expose_form", "expose_viewset"):
        assert getattr(mcp_server, name) is getattr(mcp_server.expose, name)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        mcp_server.expose.nothing  # noqa: B018
