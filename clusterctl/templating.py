"""The one Jinja2 environment for the shipped templates (``templates/``): StrictUndefined, so a missing
value is an error, never an empty string in a Dockerfile or a shell script; no autoescaping for the
Dockerfiles and scripts, autoescaping for the HTML report (``html_environment``); block tags leave no blank
lines."""

from __future__ import annotations

import jinja2

from clusterctl.paths import data_dir


def template_environment() -> jinja2.Environment:
    """A Jinja2 environment loading ``templates/`` (see the module docstring for its settings)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def html_environment() -> jinja2.Environment:
    """The environment for the HTML templates: as ``template_environment`` but every value is escaped
    (a run's findings or a path may hold ``<`` or ``&``)."""
    environment = template_environment()
    environment.autoescape = True
    return environment
