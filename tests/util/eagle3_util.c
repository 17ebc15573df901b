/* Tiny random EAGLE-3 heads for tests (see eagle3_util.h). */
#include "eagle3_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

te3_opts te3_default(const rt_model *m)
{
	te3_opts o;
	memset(&o, 0, sizeof(o));
	o.draft_vocab = m->cfg.vocab;
	o.n_heads = m->cfg.n_heads;
	o.n_kv_heads = m->cfg.n_kv_heads;
	o.ffn = 2 * m->cfg.dim;
	o.taps[0] = 0;
	o.taps[1] = m->cfg.n_layers / 2;
	o.taps[2] = m->cfg.n_layers - 1;
	if (o.taps[1] <= 0 || o.taps[1] >= o.taps[2])
		o.taps[1] = o.taps[2] > 1 ? 1 : 0;
	o.scale = 1.0;
	return o;
}

struct tw {
	char name[96];
	const char *dtype;
	int64_t d0, d1;
	double bias, scale;
	int kind; /* 0 random floats, 1 d2t, 2 t2d */
};

int te3_write(const char *dir, const rt_model *m, const te3_opts *o, uint64_t seed)
{
	const int H = m->cfg.dim, V = m->cfg.vocab, Vd = o->draft_vocab, hd = H / o->n_heads;
	const int qd = o->n_heads * hd, kvd = o->n_kv_heads * hd, F = o->ffn;
	char path[512];
	snprintf(path, sizeof(path), "%s/config.json", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	if (o->config_override)
		fputs(o->config_override, f);
	else
		fprintf(f,
		        "{\"architectures\": [\"LlamaForCausalLMEagle3\"], \"model_type\": \"llama\", \"hidden_act\": \"silu\",\n"
		        " \"hidden_size\": %d, \"intermediate_size\": %d, \"num_attention_heads\": %d,\n"
		        " \"num_key_value_heads\": %d, \"num_hidden_layers\": 1, \"vocab_size\": %d, \"draft_vocab_size\": %d,\n"
		        " \"rms_norm_eps\": 1e-5, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false,\n"
		        " \"eagle_config\": {\"eagle_aux_hidden_state_layer_ids\": [%d, %d, %d], \"use_aux_hidden_state\": true}}\n",
		        H, F, o->n_heads, o->n_kv_heads, V, Vd, o->taps[0], o->taps[1], o->taps[2]);
	fclose(f);
	/* the draft ids' target ids, increasing */
	int32_t *used = malloc((size_t)Vd * sizeof(*used));
	for (int i = 0; i < Vd; i++)
		used[i] = o->used ? o->used[i] : (int32_t)((int64_t)i * V / Vd);
	struct tw t[24];
	int n = 0;
	double s2 = 2.0 * o->scale;
	t[n++] = (struct tw){ "fc.weight", "F32", H, 3 * (int64_t)H, 0, s2 / sqrt(3.0 * H), 0 };
	struct { const char *k; int64_t d0, d1; double b, sc; } lw[] = {
		{ "input_layernorm.weight", H, 0, 1, 0.2 }, { "hidden_norm.weight", H, 0, 1, 0.2 },
		{ "self_attn.q_proj.weight", qd, 2 * H, 0, 1.5 * s2 / sqrt(2.0 * H) },
		{ "self_attn.k_proj.weight", kvd, 2 * H, 0, 1.5 * s2 / sqrt(2.0 * H) },
		{ "self_attn.v_proj.weight", kvd, 2 * H, 0, s2 / sqrt(2.0 * H) },
		{ "self_attn.o_proj.weight", H, qd, 0, s2 / sqrt((double)qd) },
		{ "post_attention_layernorm.weight", H, 0, 1, 0.2 },
		{ "mlp.gate_proj.weight", F, H, 0, s2 / sqrt((double)H) },
		{ "mlp.up_proj.weight", F, H, 0, s2 / sqrt((double)H) },
		{ "mlp.down_proj.weight", H, F, 0, s2 / sqrt((double)F) },
	};
	for (size_t i = 0; i < sizeof(lw) / sizeof(lw[0]); i++) {
		t[n] = (struct tw){ "", "F32", lw[i].d0, lw[i].d1, lw[i].b, lw[i].sc, 0 };
		snprintf(t[n].name, sizeof(t[n].name), "midlayer.%s", lw[i].k);
		n++;
	}
	t[n++] = (struct tw){ "norm.weight", "F32", H, 0, 1, 0.2, 0 };
	t[n++] = (struct tw){ "lm_head.weight", "F32", Vd, H, 0, 2 * s2 / sqrt((double)H), 0 };
	if (o->own_embd)
		t[n++] = (struct tw){ "embed_tokens.weight", "F32", V, H, 0, 1.0, 0 };
	if (!o->no_maps) {
		t[n++] = (struct tw){ "d2t", o->d2t_bad == 3 ? "F32" : "I64", Vd, 0, 0, 0, 1 };
		t[n++] = (struct tw){ "t2d", "BOOL", V, 0, 0, 0, 2 };
	}
	if (o->extra_tensor) {
		t[n] = (struct tw){ "", "F32", 4, 0, 0, 1, 0 };
		snprintf(t[n].name, sizeof(t[n].name), "%s", o->extra_tensor);
		n++;
	}
	char *hdr = malloc(16384);
	size_t off = 0, k = 0;
	k += (size_t)snprintf(hdr + k, 16384 - k, "{");
	int first = 1;
	for (int i = 0; i < n; i++) {
		if (o->skip_tensor && !strcmp(o->skip_tensor, t[i].name))
			continue;
		if (o->bad_tensor && !strcmp(o->bad_tensor, t[i].name))
			t[i].d0++;
		size_t es = !strcmp(t[i].dtype, "I64") ? 8 : !strcmp(t[i].dtype, "BOOL") ? 1 : 4;
		size_t bytes = (size_t)t[i].d0 * (size_t)(t[i].d1 ? t[i].d1 : 1) * es;
		if (t[i].d1)
			k += (size_t)snprintf(hdr + k, 16384 - k, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
			                      first ? "" : ",", t[i].name, t[i].dtype, (long long)t[i].d0, (long long)t[i].d1,
			                      off, off + bytes);
		else
			k += (size_t)snprintf(hdr + k, 16384 - k, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%zu,%zu]}",
			                      first ? "" : ",", t[i].name, t[i].dtype, (long long)t[i].d0, off, off + bytes);
		first = 0;
		off += bytes;
	}
	k += (size_t)snprintf(hdr + k, 16384 - k, "}");
	while (k % 8)
		hdr[k++] = ' ';
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	f = fopen(path, "wb");
	if (!f) {
		free(hdr);
		free(used);
		return -1;
	}
	uint64_t hl = k;
	fwrite(&hl, 8, 1, f);
	fwrite(hdr, 1, k, f);
	uint64_t s = seed;
	for (int i = 0; i < n; i++) {
		if (o->skip_tensor && !strcmp(o->skip_tensor, t[i].name))
			continue;
		size_t numel = (size_t)t[i].d0 * (size_t)(t[i].d1 ? t[i].d1 : 1);
		for (size_t j = 0; j < numel; j++) {
			if (t[i].kind == 1) {
				int64_t v = j < (size_t)Vd ? (int64_t)used[j] - (int64_t)j : 0;
				if (o->d2t_bad == 1 && j == 0)
					v = V + 5;
				if (o->d2t_bad == 2 && j == 1)
					v = (int64_t)used[0] - 1;
				if (o->d2t_bad == 3) {
					float fv = (float)v;
					fwrite(&fv, 4, 1, f);
				} else {
					fwrite(&v, 8, 1, f);
				}
			} else if (t[i].kind == 2) {
				uint8_t b = 0;
				for (int d = 0; d < Vd; d++)
					b |= used[d] == (int32_t)j;
				if (o->t2d_bad && (int32_t)j == used[0])
					b = 0;
				fwrite(&b, 1, 1, f);
			} else {
				float v = (float)(t[i].bias + t[i].scale * (2 * tu_uniform(&s) - 1));
				fwrite(&v, 4, 1, f);
			}
		}
	}
	fclose(f);
	free(hdr);
	free(used);
	return 0;
}

void te3_rmdir(const char *dir)
{
	static const char *const files[] = { "config.json", "model.safetensors", "ref.json", NULL };
	char p[512];
	for (const char *const *n = files; *n; n++) {
		snprintf(p, sizeof(p), "%s/%s", dir, *n);
		unlink(p);
	}
	rmdir(dir);
}
