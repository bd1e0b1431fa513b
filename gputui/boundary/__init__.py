"""What crosses the program's edge, for every layer.

The one output sanitiser (``sanitise``), the one reader and writer of the files a user names
(``userfiles``), the limits JSON is measured against before it is decoded (``json_limits``), one
way to write a moment (``timestamps``) and the start-up marks for the benchmarks
(``startup_trace``). Nothing here imports the rest of gputui.
"""
