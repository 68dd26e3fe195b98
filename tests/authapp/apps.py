from django.apps import AppConfig


class AuthAppConfig(AppConfig):
    name = "tests.authapp"
    label = "authapp"
