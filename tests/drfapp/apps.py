from django.apps import AppConfig


class DRFAppConfig(AppConfig):
    name = "tests.drfapp"
    label = "drfapp"
