from django.apps import AppConfig


class SuitesConfig(AppConfig):
    name = "webapp.suites"
    label = "suites"
