# robot.mk: the robot-brain example (examples/robot/README.md), included by the Makefile:
# its programs, `make robot-demo` (data, train, accuracy, robot, fleet, stateful fleet) and
# `make robot-check`.
ROBOT_DIR    := examples/robot
ROBOT_COMMON := $(addprefix $(BUILD)/$(ROBOT_DIR)/,vocab.o spec.o util.o weights.o policy.o)
ROBOT_BIN    := $(addprefix $(BUILD)/bin/,robot_gen robot_train robot robot_fleet)
ROBOT_LINK   := $(ROBOT_COMMON) $(CLIENT_LIB) $(PROTO_LIB) $(LIB) $(NNG_LIBS) $(LDLIBS)
ROBOT_DATA   := $(abspath $(BUILD))/robot

$(BUILD)/bin/robot_%: $(BUILD)/$(ROBOT_DIR)/%.o $(ROBOT_COMMON) $(CLIENT_LIB) $(PROTO_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ROBOT_LINK)

$(BUILD)/bin/robot: $(BUILD)/$(ROBOT_DIR)/robot.o $(ROBOT_COMMON) $(CLIENT_LIB) $(PROTO_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ROBOT_LINK)

.PHONY: robot robot-demo robot-check robot-replay robot-stateful
robot: $(ROBOT_BIN) $(DAEMON_BIN)

# The whole example against a tensord of its own (examples/robot/demo.sh).
robot-demo: robot
	$(ROBOT_DIR)/demo.sh $(BUILD) $(ROBOT_DATA)

# A short training through the daemon that must reach a real held-out accuracy.
# Chance is 1/16 per plan word; a plan is 1 to 4 of them. Then a short stateful fleet (8 robots,
# 100 steps each) whose every answer must equal the robots' own step-by-step computation. Part
# of train-check (make check).
robot-check: robot
	ROBOT_STEPS=300 ROBOT_MIN_ACC=90 ROBOT_SERVE_MAX=64 ROBOT_BENCH=0 ROBOT_SKIP_FLEET=1 \
		ROBOT_STATEFUL_N=8 ROBOT_STATEFUL_STEPS=100 $(ROBOT_DIR)/demo.sh $(BUILD) $(ROBOT_DATA)-check
train-check: robot-check

# Only the stateful fleet (robot_fleet --stateful; its policy is seeded, nothing to train), against
# a tensord of its own: ROBOT_STATEFUL_N robots (32) for ROBOT_STATEFUL_SECONDS (5).
robot-stateful: robot
	ROBOT_ONLY_STATEFUL=1 $(ROBOT_DIR)/demo.sh $(BUILD) $(ROBOT_DATA)

# 100,000 logged commands through tensorctl replay (needs the brain loaded: robot-demo or robot_train).
robot-replay: robot $(CTL_BIN)
	$(ROBOT_DIR)/replay.sh $(BUILD) $(ROBOT_DATA)

all: $(ROBOT_BIN)
-include $(ROBOT_COMMON:.o=.d) $(patsubst %,$(BUILD)/$(ROBOT_DIR)/%.d,gen train robot fleet)

# The robot brain's table next to tinygrad (bench/compare_robot.sh).
$(BUILD)/bin/bench_robot_table: $(BUILD)/bench/robot_table.o $(ROBOT_COMMON) $(CLIENT_LIB) $(PROTO_LIB) $(LIB) | $(DAEMON_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ROBOT_LINK)
