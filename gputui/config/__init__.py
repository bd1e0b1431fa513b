"""The configuration file and the monitor's remembered state.

``file`` (the config file), ``ui_state`` (preferences changed in the monitor), ``alert_rules``
(the ``[[alerts]]`` grammar) and ``values`` (the value grammar they share).
"""
