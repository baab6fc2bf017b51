"""What runs torch or a device: one subpackage per chapter area, beside the torch-free models.

``aiprof.tensor``, ``aiprof.inference``, ``aiprof.distributed`` and ``aiprof.gpu`` are models:
they import without torch and analyze a trace or a description on a laptop. Code that runs a
model, times the GPU or starts process groups lives here, in ``measure/tensor``,
``measure/inference`` and ``measure/distributed``, so the rule "no torch under the models" is a
rule about folders. Capture (``aiprof.capture``) is the first stage of the data flow and keeps its
own package.
"""
