"""Why is my job slow on the file system? Reading (Darshan logs, strace traces), the rules,
their ranking by the seconds each finding costs, and the reports a user sends to support.

facts      the neutral facts every source is reduced to (Run, one row per layer/file/rank)
origins    whose file: the application's data, its software environment, or the system's
darshan    Darshan logs through PyDarshan, whole-column, every layer and the Lustre layouts
trace      a program traced by strace (`-- CMD`) or a saved trace; trace_tally reads
           strace's lines into trace_files' per-file counts, trace_profile holds the
           run, trace_report prints it
rules      the findings, with their cost in seconds and the counters that prove them
report     text, JSON and one self-contained HTML page; svg_charts draws the page's charts
           as inline SVG (no matplotlib) from figure_data's numbers
inputs     one entry for all three inputs: a log, a saved trace, or a command
"""
