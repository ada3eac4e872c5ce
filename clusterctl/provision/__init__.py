"""The provision stage: set up the hosts from a playbook.

``playbook`` (the model and its pure rendering), ``plan`` (what the steps are rendered with, and every
step per node, offline: ``provision --plan``) and ``executor`` (probe, change where needed, verify on
every node; then the status bundle and, when asked, the image delivered).
"""
