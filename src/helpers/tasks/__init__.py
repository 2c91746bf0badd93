"""The chapters' tasks and experiments: data, toy tasks, training loops and experiment
drivers. The library (helpers.*) never imports this package.
"""
