"""The multi-label kind: sigmoid classifiers with partly shared labels (ANT, thesis ch. 4).

Its math so far: per-label uncertainty (uncertainty.py), the per-label integrators
(integration.py), the label-dependency transfer (transfer.py) and the metrics (metrics.py).
The kind's description and its seams join KINDS once its jobs exist (issue 27).
"""
