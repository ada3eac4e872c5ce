"""Run records, the run history, references, reports and plots."""
