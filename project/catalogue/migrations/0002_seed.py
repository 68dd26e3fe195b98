"""Seed the demo catalogue with a few real books."""

from django.db import migrations

BOOKS = [
    (
        "Ursula K. Le Guin",
        "A Wizard of Earthsea",
        1968,
        "9780547773742",
        "A young mage learns the cost of power.",
    ),
    (
        "Ursula K. Le Guin",
        "The Left Hand of Darkness",
        1969,
        "9780441478125",
        "An envoy on a planet without fixed sex.",
    ),
    (
        "Italo Calvino",
        "Invisible Cities",
        1972,
        "9780156453806",
        "Marco Polo describes fifty-five cities to Kublai Khan.",
    ),
    (
        "Italo Calvino",
        "If on a Winter's Night a Traveler",
        1979,
        "9780156439619",
        "A novel about reading a novel.",
    ),
    ("Jorge Luis Borges", "Ficciones", 1944, "9780802130303", "Labyrinths, libraries and mirrors."),
    ("Toni Morrison", "Beloved", 1987, "9781400033416", "A house haunted by the memory of slavery."),
    ("Chinua Achebe", "Things Fall Apart", 1958, "9780385474542", "Okonkwo's world meets colonial rule."),
    (
        "Octavia E. Butler",
        "Kindred",
        1979,
        "9780807083697",
        "A writer is pulled back in time to antebellum Maryland.",
    ),
]


def seed(apps, schema_editor):
    Author = apps.get_model("catalogue", "Author")
    Book = apps.get_model("catalogue", "Book")
    for author_name, title, year, isbn, summary in BOOKS:
        author, _ = Author.objects.get_or_create(name=author_name)
        Book.objects.get_or_create(
            isbn=isbn,
            defaults={
                "title": title,
                "author": author,
                "year": year,
                "summary": summary,
                "copies_available": 2,
            },
        )


def unseed(apps, schema_editor):
    apps.get_model("catalogue", "Book").objects.filter(isbn__in=[b[3] for b in BOOKS]).delete()


class Migration(migrations.Migration):
    dependencies = [("catalogue", "0001_initial")]
    operations = [migrations.RunPython(seed, unseed)]
