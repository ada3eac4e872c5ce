"""The benchmark image: profiles, rendering of the Dockerfile and its build context."""
