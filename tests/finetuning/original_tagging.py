"""The original's pure-Python tagging functions, as google-research/electra has them
(finetune/tagging/tagging_utils.py, tagging_metrics.py): the references the tagging
tests compare electra_tf's BIOES conversion and span F1 with."""


def get_span_labels(sentence_tags):
    """tagging_utils.get_span_labels, as it is."""
    span_labels = []
    last = 'O'
    start = -1
    for i, tag in enumerate(sentence_tags):
        pos, _ = (None, 'O') if tag == 'O' else tag.split('-')
        if (pos == 'S' or pos == 'B' or tag == 'O') and last != 'O':
            span_labels.append((start, i - 1, last.split('-')[-1]))
        if pos == 'B' or pos == 'S' or last == 'O':
            start = i
        last = tag
    if sentence_tags[-1] != 'O':
        span_labels.append((start, len(sentence_tags) - 1,
                            sentence_tags[-1].split('-')[-1]))
    return span_labels


def get_tags(span_labels, length, encoding):
    """tagging_utils.get_tags, as it is."""
    tags = ['O' for _ in range(length)]
    for s, e, t in span_labels:
        for i in range(s, e + 1):
            tags[i] = 'I-' + t
        if 'E' in encoding:
            tags[e] = 'E-' + t
        if 'B' in encoding:
            tags[s] = 'B-' + t
        if 'S' in encoding and s - e == 0:
            tags[s] = 'S-' + t
    return tags


def entity_f1(labels, preds):
    """tagging_metrics.py's EntityLevelF1Scorer over sentences of tags, as fractions."""
    n_correct, n_predicted, n_gold = 0, 0, 0
    for sent_labels, sent_preds in zip(labels, preds):
        sent_spans = set(get_span_labels(sent_labels))
        span_preds = set(get_span_labels(sent_preds))
        n_correct += len(sent_spans & span_preds)
        n_gold += len(sent_spans)
        n_predicted += len(span_preds)
    if n_correct == 0:
        p, r, f1 = 0, 0, 0
    else:
        p = 1.0 * n_correct / n_predicted
        r = 1.0 * n_correct / n_gold
        f1 = 2 * p * r / (p + r)
    return {"f1": f1, "precision": p, "recall": r}
