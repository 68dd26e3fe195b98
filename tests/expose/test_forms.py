"""``expose_form`` in process: what it refuses, and the schema of the field types the live tests don't use."""

from __future__ import annotations

from typing import Any

import pytest
from django import forms
from django.core.exceptions import ImproperlyConfigured

from mcp_server import MCPServer
from mcp_server.expose.forms import expose_form
from project.catalogue.models import Author, Book


class Survey(forms.Form):
    tags = forms.MultipleChoiceField(choices=[("a", "A"), ("Group", [("b", "B"), ("c", "C")])])
    books = forms.ModelMultipleChoiceField(queryset=Book.objects.all(), required=False)
    sure = forms.NullBooleanField()
    when = forms.DateField()
    code = forms.CharField(min_length=2, max_length=4)


class NameForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Author
        fields = ["name"]


def test_schema_of_choices_models_and_dates() -> None:
    server = MCPServer("forms")

    def answer(form: Survey, ctx: Any) -> dict[str, Any]:
        return dict(form.cleaned_data)

    expose_form(server, Survey, name="survey", handler=answer)
    schema = server.tools["survey"].definition()["inputSchema"]
    assert set(schema["required"]) == {"tags", "when", "code"}
    props = schema["properties"]
    assert props["tags"]["type"] == "array"
    assert props["tags"]["items"]["enum"] == ["a", "b", "c"]  # optgroups flattened
    assert props["when"]["format"] == "date"
    assert props["code"]["minLength"] == 2
    assert props["code"]["maxLength"] == 4
    assert server.tools["survey"].permission is None  # a plain Form: open unless permission= says otherwise


def test_a_model_form_is_guarded_by_the_add_permission() -> None:
    server = MCPServer("model-form")
    expose_form(server, NameForm, name="author_add")
    assert server.tools["author_add"].permission == "catalogue.add_author"
    expose_form(server, NameForm, name="author_add_open", permission=None)
    assert server.tools["author_add_open"].permission is None


def test_refusals() -> None:
    with pytest.raises(ImproperlyConfigured, match="needs handler="):
        expose_form(MCPServer("x"), Survey, name="survey")

    async def later(form: Any, ctx: Any) -> None:
        return None

    with pytest.raises(ImproperlyConfigured, match="sync only"):
        expose_form(MCPServer("y"), NameForm, name="author_add", handler=later)
