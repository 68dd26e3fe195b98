"""A model of the tests only: ``PickyBook`` reads and writes the catalogue's books (unmanaged, on their table)
with a foreign key whose ``limit_choices_to`` admits only authors whose name starts with "Picky"."""

from __future__ import annotations

from django.db import models

from project.catalogue.models import Author


class PickyBook(models.Model):
    title = models.CharField(max_length=300)
    author = models.ForeignKey(
        Author, on_delete=models.PROTECT, related_name="+", limit_choices_to={"name__startswith": "Picky"}
    )
    year = models.PositiveIntegerField()
    isbn = models.CharField(max_length=20, unique=True)
    summary = models.TextField(blank=True)
    copies_available = models.PositiveIntegerField(default=1)

    class Meta:
        managed = False
        db_table = "catalogue_book"
        ordering = ["title"]

    def __str__(self) -> str:
        return self.title
