from django.apps import AppConfig


class CatalogueConfig(AppConfig):
    name = "project.catalogue"
    label = "catalogue"
    verbose_name = "Library catalogue"
    default_auto_field = "django.db.models.BigAutoField"
