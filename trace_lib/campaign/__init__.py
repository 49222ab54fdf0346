"""The campaign: model descriptors (``models``) and the plan of slices (``plan``) that generation, scoring and
``tests_reproduction`` share."""
