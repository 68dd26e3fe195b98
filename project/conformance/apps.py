from django.apps import AppConfig


class ConformanceConfig(AppConfig):
    name = "project.conformance"
    label = "conformance"
    verbose_name = "MCP conformance fixtures"
