"""Building a union classifier by merging teachers' weights (`kiwb merge`): loading and
checking the teachers and the base, the backbone rule over every tensor but the head, and each
teacher's head rows placed into the union's slots. kiwb.core.merging holds the math;
kiwb.workers.merge_job runs it as a job and records it as a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from kiwb.console import console
from kiwb.core import merging
from kiwb.errors import TeacherError
from kiwb.kinds import TeacherKind, kind_named
from kiwb.workers.runtime import load_classifier
from kiwb.workers.teachers import TeacherInfo, load_teacher, resolve_checkpoint

# Whether a teacher was fine-tuned from the base (or from the other teachers' base): the
# cosine between their weight matrices and embeddings, one vector each (LayerNorm's weights
# start at one in every model and would hide a difference). Measured: the MiniLM teachers of
# debian-8 and all-MiniLM-L6-v2 1.000; the tests' tiny teachers and their base 0.995; the
# demos' tiny teachers, fine-tuned at learning rates of 2e-3 to 5e-3, 0.46 to 0.87 (their
# distance from the base reaches 1.8 of its norm, so distance cannot tell); a randomly
# initialised BERT and a MiniLM teacher -0.001, two tiny BERTs of other initialisations 0.009.
MIN_COSINE = 0.2


@dataclass
class MergeInputs:
    """The loaded teachers (their models in float32 on the CPU), what is merged of them, and
    the base where the rule needs one."""

    teachers: list[TeacherInfo]
    models: list  # transformers models, teachers' order
    tokenizer: object  # the first teacher's: every teacher's vocabulary is checked the same
    union: list[str]
    head: tuple[str, str | None]  # the head's weight and bias names in the state dict
    backbone: list[str]  # every other floating tensor's name
    states: list[dict[str, torch.Tensor]]
    base: dict[str, torch.Tensor] | None = None
    base_name: str | None = None
    not_in_base: list[str] = field(default_factory=list)  # averaged: the base lacks them
    # the cosine of each teacher's weights with the base's (or, for an average, the first
    # teacher's): how sure it is that they share an origin
    similarities: dict[str, float] = field(default_factory=dict)
    ties_direction: dict = field(default_factory=dict)  # TIES's, for the last k asked


def load_merge_inputs(teachers: list[TeacherInfo], kind: TeacherKind, base: str | None,
                      needs_base: bool) -> MergeInputs:
    """Load and check the teachers (one architecture, one vocabulary, the same shapes outside
    the head, outputs named as the union's) and, where the rule needs it, the base; every
    refusal is one line naming the first difference."""
    union = kind.checkpoints.union([info.known for info in teachers])
    for info in teachers:
        _check_outputs(info, union)
    first = teachers[0]
    for info in teachers[1:]:
        if (info.architecture, info.model_type) != (first.architecture, first.model_type):
            raise TeacherError(f"cannot merge teacher {info.name!r} ({info.architecture}) with "
                               f"{first.name!r} ({first.architecture}): weight merging needs one "
                               "architecture; distill them instead (kiwb train)")
    loaded = [load_teacher(info, "cpu") for info in teachers]
    models = [model for model, _ in loaded]
    _check_vocabularies(teachers, [tokenizer for _, tokenizer in loaded])
    head = head_names(models[0])
    states = [{name: tensor.detach() for name, tensor in model.state_dict().items()}
              for model in models]
    backbone = [name for name, tensor in states[0].items()
                if name not in head and tensor.is_floating_point()]
    for info, model, state in zip(teachers[1:], models[1:], states[1:], strict=True):
        _check_same_shapes(first, states[0], info, state, head, head_names(model))
    inputs = MergeInputs(teachers, models, loaded[0][1], union, head, backbone, states)
    if needs_base:
        _attach_base(inputs, base)
    else:
        matrices = _matrices(states[0], backbone)
        inputs.similarities = {info.name: merging.cosine_similarity(state, states[0], matrices)
                               for info, state in zip(teachers[1:], states[1:], strict=True)}
        unrelated = {name: value for name, value in inputs.similarities.items()
                     if value < MIN_COSINE}
        if unrelated:
            name, value = next(iter(unrelated.items()))
            raise TeacherError(f"teacher {name!r} was not fine-tuned from the base {first.name!r} "
                               f"was: the cosine between their weights is {value:.2f} (teachers "
                               f"of one base: over {MIN_COSINE}, usually near 1), so averaging "
                               "them mixes unrelated weights; distill them instead (kiwb train)")
    return inputs


def head_names(model) -> tuple[str, str | None]:
    """The state-dict names of the layer that maps to the labels: the last linear layer with
    one output per label (BERT's classifier, RoBERTa's classifier.out_proj). A pooler or a
    dense layer before it is backbone and follows the backbone's rule."""
    found = None
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and module.out_features == model.config.num_labels:
            found = name
    if found is None:
        raise TeacherError(f"cannot find the {model.config.num_labels}-output classifier layer of "
                           f"a {type(model).__name__}; kiwb merges heads that end in a linear layer")
    module = model.get_submodule(found)
    return f"{found}.weight", (f"{found}.bias" if module.bias is not None else None)


def _check_outputs(info: TeacherInfo, union: Sequence[str]) -> None:
    """Each head row is placed by its output's name: every output must be one of the union's
    (a tagger whose tags are in another scheme is not)."""
    if info.scheme not in (None, "bio"):  # an IOB1 I-X row also fires on entity starts
        raise TeacherError(f"teacher {info.name!r} tags in the {info.scheme} scheme, so its head "
                           "rows mean other things than the union's BIO2 tags of the same names; "
                           "merge BIO2 taggers only, or distill them instead (kiwb train)")
    outside = [name for name in info.labels if name not in union]
    if outside:
        raise TeacherError(f"teacher {info.name!r}: its outputs {', '.join(outside[:4])} are not "
                           f"named as the student's ({', '.join(union[:6])}...), so its head rows "
                           "have no place in a merged head; distill it instead (kiwb train)")


def _check_vocabularies(teachers: list[TeacherInfo], tokenizers: list) -> None:
    first = tokenizers[0].get_vocab()
    for info, tokenizer in zip(teachers[1:], tokenizers[1:], strict=True):
        if tokenizer.get_vocab() != first:
            raise TeacherError(f"cannot merge teacher {info.name!r} with {teachers[0].name!r}: "
                               "their tokenizers' vocabularies differ, so the same embedding "
                               "row means different tokens; distill them instead (kiwb train)")


def _check_same_shapes(first: TeacherInfo, reference: dict, info: TeacherInfo, state: dict,
                       head: tuple, own_head: tuple) -> None:
    """The same tensors, of the same shapes, outside the head: else the first difference."""
    if own_head != head:  # a bias in one head and not in the other included
        raise TeacherError(f"cannot merge teacher {info.name!r} with {first.name!r}: their "
                           f"classifier layers differ ({', '.join(filter(None, own_head))} "
                           f"and {', '.join(filter(None, head))})")
    for name, tensor in reference.items():
        if name in head:
            if name in state and state[name].shape[1:] != tensor.shape[1:]:
                raise TeacherError(f"cannot merge teacher {info.name!r} with {first.name!r}: "
                                   f"{name} is {tuple(state[name].shape)} against "
                                   f"{tuple(tensor.shape)}")
            continue
        if name not in state:
            raise TeacherError(f"cannot merge teacher {info.name!r} with {first.name!r}: it has "
                               f"no {name}")
        if state[name].shape != tensor.shape:
            raise TeacherError(f"cannot merge teacher {info.name!r} with {first.name!r}: {name} "
                               f"is {tuple(state[name].shape)} against {tuple(tensor.shape)}; "
                               "weight merging needs models of one size")
    extra = sorted(set(state) - set(reference))
    if extra:
        raise TeacherError(f"cannot merge teacher {info.name!r} with {first.name!r}: it has "
                           f"{extra[0]}, which {first.name!r} lacks")


def _attach_base(inputs: MergeInputs, base: str | None) -> None:
    """The task-arithmetic origin: the base loaded as the teachers' model class. Tensors the
    base lacks (a bare encoder has no pooler, say) are averaged instead, and said so."""
    if not base:
        raise TeacherError("task arithmetic and TIES add the teachers' changes to the base they "
                           "were fine-tuned from: pass --base FOLDER or set [training] student "
                           "in kiwb.toml")
    folder = resolve_checkpoint("base", base, role="merge base")
    first = inputs.teachers[0]
    try:
        model, loading = load_classifier(
            folder, kind=first.kind, num_labels=inputs.models[0].config.num_labels,
            ignore_mismatched_sizes=True, output_loading_info=True)
    except Exception as error:
        raise TeacherError(f"merge base {base}: cannot load it as a {first.architecture}: "
                           f"{str(error).strip().splitlines()[0][:200]}") from None
    if model.config.model_type != first.model_type:
        raise TeacherError(f"merge base {base} is a {model.config.model_type} model and the "
                           f"teachers are {first.model_type}: give the base they were "
                           "fine-tuned from with --base")
    state = {name: tensor.detach() for name, tensor in model.state_dict().items()}
    mismatched = [entry for entry in loading.get("mismatched_keys") or []
                  if entry[0] not in inputs.head]
    if mismatched:
        name, found, wanted = mismatched[0]
        raise TeacherError(f"merge base {base}: {name} is {tuple(found)} against the teachers' "
                           f"{tuple(wanted)}; give the base they were fine-tuned from with --base")
    missing = set(loading.get("missing_keys") or [])
    inputs.not_in_base = [name for name in inputs.backbone if name in missing]
    inputs.base, inputs.base_name = state, base
    known = _matrices(state, [name for name in inputs.backbone if name not in missing])
    inputs.similarities = {info.name: merging.cosine_similarity(teacher_state, state, known)
                           for info, teacher_state in zip(inputs.teachers, inputs.states,
                                                          strict=True)}
    for name, value in inputs.similarities.items():
        if value < MIN_COSINE:
            raise TeacherError(f"teacher {name!r} was not fine-tuned from the base {base}: the "
                               f"cosine between their weights is {value:.2f} (a model fine-tuned "
                               f"from it: over {MIN_COSINE}, usually near 1); give the base it "
                               "was fine-tuned from with --base")
    if inputs.not_in_base:
        console.print(f"The base lacks {len(inputs.not_in_base)} of the teachers' tensors ("
                      f"{', '.join(inputs.not_in_base[:3])}{'...' if len(inputs.not_in_base) > 3 else ''}"
                      "): those are averaged", highlight=False, markup=False, soft_wrap=True)


def _placed(tensors: list, outputs: list, union: list[str]):
    try:
        return merging.place_rows(tensors, outputs, union)
    except ValueError as error:
        raise TeacherError(f"cannot place the teachers' head rows in the union's slots: {error}; "
                           "distill them instead (kiwb train)") from None


def _matrices(state: dict, names: list[str]) -> list[str]:
    """The weight matrices and embeddings among `names`: what a similarity is measured over."""
    return [name for name in names if state[name].dim() >= 2]


def merged_backbone(inputs: MergeInputs, method: str, scale: float | None,
                    top_k: float | None) -> dict[str, torch.Tensor]:
    """Every backbone tensor by the method's rule (those the base lacks: averaged)."""
    names = [name for name in inputs.backbone if name not in inputs.not_in_base]
    if method == "average":
        return merging.average(inputs.states, inputs.backbone)
    if method == "task-arithmetic":
        merged = merging.task_arithmetic(inputs.base, inputs.states, names, scale)
    else:  # the direction depends on k alone: the settings of lambda for one k share it
        if top_k not in inputs.ties_direction:
            inputs.ties_direction = {top_k: merging.ties_direction(inputs.base, inputs.states,
                                                                   names, top_k)}
        merged = merging.scaled_from(inputs.base, inputs.ties_direction[top_k], scale)
    merged.update(merging.average(inputs.states, inputs.not_in_base))
    return merged


def merged_model(inputs: MergeInputs, backbone: dict[str, torch.Tensor]):
    """A classifier of the teachers' class over the union: the merged backbone, and each
    teacher's head rows in their union slots (a shared label's rows and biases averaged)."""
    import copy

    model = copy.deepcopy(inputs.models[0])
    weight_name, bias_name = inputs.head
    outputs = [info.labels for info in inputs.teachers]
    weight = _placed([state[weight_name] for state in inputs.states], outputs, inputs.union)
    layer_name = weight_name.rsplit(".", 1)[0]
    layer = torch.nn.Linear(weight.shape[1], len(inputs.union), bias=bias_name is not None)
    model.set_submodule(layer_name, layer)
    state = {**inputs.states[0], **backbone, weight_name: weight}
    if bias_name is not None:
        state[bias_name] = _placed([state_[bias_name] for state_ in inputs.states], outputs,
                                   inputs.union)
    model.load_state_dict(state, strict=True)
    union = list(inputs.union)
    config = model.config
    config.num_labels = len(union)  # (resets id2label, set next)
    config.id2label = dict(enumerate(union))
    config.label2id = {label: index for index, label in enumerate(union)}
    # the kind's head, whatever teacher 0's config.json said (kiwb.toml may have named it)
    config.problem_type = (kind_named(inputs.teachers[0].kind).checkpoints.problem_type
                           or config.problem_type)
    if getattr(config, "label_thresholds", None) is not None:
        del config.label_thresholds  # tuned for teacher 0's labels (a kiwb export's), not these
    return model.eval()
